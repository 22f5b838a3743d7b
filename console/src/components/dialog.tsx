// A modal dialog on the native <dialog> (focus moves in, Escape closes, the page behind is inert).

import type { ComponentChildren } from "preact";
import { useEffect, useMemo, useRef } from "preact/hooks";

export interface DialogProps {
  title: string;
  /** Most of the window's width (a side-by-side comparison), rather than a form's. */
  wide?: boolean;
  onClose(): void;
  children: ComponentChildren;
}

let dialogs = 0;

export function Dialog({ title, wide, onClose, children }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  // Unique, since a confirmation may open over another dialog (a restore over the history).
  const titleId = useMemo(() => `dialog-title-${++dialogs}`, []);
  useEffect(() => {
    const dialog = ref.current;
    const opener = document.activeElement as HTMLElement | null;
    dialog?.showModal();
    return () => {
      dialog?.close();
      opener?.focus?.();
    };
  }, []);
  return (
    <dialog
      ref={ref}
      class={wide ? "wide" : undefined}
      aria-labelledby={titleId}
      onCancel={(e) => {
        e.preventDefault();
        onClose();
      }}
    >
      <h2 id={titleId}>{title}</h2>
      {children}
    </dialog>
  );
}

/** The message of an RPC or fetch failure, for the user. */
export function errorText(err: unknown): string {
  const e = err as { rawMessage?: string; message?: string };
  return e.rawMessage ?? e.message ?? String(err);
}

/**
 * A confirmation's buttons: the action (red when it destroys or replaces), then Cancel, which has
 * the focus when the dialog opens, so that Enter by habit changes nothing.
 */
export function ConfirmButtons(props: {
  children: ComponentChildren;
  onConfirm(): void;
  onCancel(): void;
  disabled?: boolean;
  danger?: boolean;
}) {
  return (
    <div class="buttons">
      <button
        type="button"
        class={props.danger === false ? undefined : "danger"}
        onClick={props.onConfirm}
        disabled={props.disabled}
      >
        {props.children}
      </button>
      <button type="button" class="secondary" onClick={props.onCancel} autofocus>
        Cancel
      </button>
    </div>
  );
}
