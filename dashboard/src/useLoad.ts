import { useCallback, useEffect, useRef, useState } from "react";
import { describeError, type ShownError } from "./api";

export interface Loaded<T> {
  data: T | undefined;
  error: ShownError | null;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads once on mount and on reload(). An answer that arrives after a newer request started (or after
 * the page was left) is dropped, so a slow old answer never overwrites a fresh one.
 */
export function useLoad<T>(load: () => Promise<T>): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ShownError | null>(null);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;

  const reload = useCallback(() => {
    const mine = ++generation.current;
    setLoading(true);
    loadRef.current().then(
      (d) => {
        if (mine !== generation.current) return;
        setData(d);
        setError(null);
        setLoading(false);
      },
      (e: unknown) => {
        if (mine !== generation.current) return;
        setError(describeError(e));
        setLoading(false);
      },
    );
  }, []);

  useEffect(() => {
    reload();
    return () => {
      generation.current++;
    };
  }, [reload]);

  return { data, error, loading, reload };
}

/** A button action that runs once at a time: a second click while the first is in flight is ignored. */
export function useAction() {
  const busy = useRef(false);
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ShownError | null>(null);
  const run = useCallback(async <T>(fn: () => Promise<T>): Promise<T | undefined> => {
    if (busy.current) return undefined;
    busy.current = true;
    setPending(true);
    setError(null);
    try {
      return await fn();
    } catch (e) {
      setError(describeError(e));
      return undefined;
    } finally {
      busy.current = false;
      setPending(false);
    }
  }, []);
  return { run, pending, error, setError };
}
