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
