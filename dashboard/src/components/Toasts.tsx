/**
 * Toasts: a short confirmation for every completed change ("Group “demo” created"), in a polite live
 * region at the bottom of the screen, gone after a few seconds. Failures are not toasts: they stay
 * inline, next to what failed, with the fix.
 */
import { createContext, useCallback, useContext, useState, type ReactNode } from "react";

interface Toast {
  id: number;
  text: string;
}

const ToastContext = createContext<(text: string) => void>(() => undefined);

export function ToastProvider({ children }: { children: ReactNode }) {
  const [toasts, setToasts] = useState<Toast[]>([]);
  const show = useCallback((text: string) => {
    const id = Date.now() + Math.random();
    setToasts((t) => [...t.slice(-2), { id, text }]);
    setTimeout(() => setToasts((t) => t.filter((x) => x.id !== id)), 5_000);
  }, []);
  return (
    <ToastContext.Provider value={show}>
      {children}
      <div className="toasts" role="status" aria-live="polite" data-testid="toasts">
        {toasts.map((t) => (
          <p key={t.id} className="toast">
            <span aria-hidden="true">✓ </span>
            {t.text}
          </p>
        ))}
      </div>
    </ToastContext.Provider>
  );
}

/** Shows a confirmation toast. */
export function useToast(): (text: string) => void {
  return useContext(ToastContext);
}
