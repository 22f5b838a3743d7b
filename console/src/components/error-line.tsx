/** Why something failed, announced to screen readers (role alert); nothing when there is no reason. */
export function ErrorLine({ text }: { text: string | undefined }) {
  return text ? (
    <p role="alert" class="error">
      {text}
    </p>
  ) : null;
}
