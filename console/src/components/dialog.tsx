// A modal dialog on the native <dialog> (focus moves in, Escape closes, the page behind is inert).

import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";

export interface DialogProps {
  title: string;
  onClose(): void;
  children: ComponentChildren;
}

export function Dialog({ title, onClose, children }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
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
      aria-labelledby="dialog-title"
      onCancel={(e) => {
        e.preventDefault();
        onClose();
      }}
    >
      <h2 id="dialog-title">{title}</h2>
      {children}
    </dialog>
  );
}

/** The message of an RPC or fetch failure, for the user. */
export function errorText(err: unknown): string {
  const e = err as { rawMessage?: string; message?: string };
  return e.rawMessage ?? e.message ?? String(err);
}
