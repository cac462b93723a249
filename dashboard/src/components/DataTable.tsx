/**
 * The dashboard's one list layout: "Loading …" until the first answer, the page's error note, an empty
 * state, then a table that reflows into labelled cards on narrow screens (each cell's `data-label` is
 * its column's header, which styles.css shows before the value), and under it, for a list read in pages,
 * the button for the next page or a note that the end is shown.
 */
import type { ReactNode } from "react";
import { Empty, Loading } from "./ui";

export interface Column<T> {
  /** The column's header, and the cell's `data-label` for the narrow layout. */
  header: string;
  /** The header is read by screen readers only (a column of buttons). */
  srOnlyHeader?: boolean;
  /** The cell has no `data-label`: the narrow layout shows it without a label. */
  unlabelled?: boolean;
  className?: string;
  cell: (row: T) => ReactNode;
  /** Further attributes of the cell (`data-*` that tests and styles read). */
  cellAttributes?: (row: T) => Record<string, string | number>;
}

/** The next page of a paged list: a button while there is one, else a note once rows are shown. */
export interface NextPage {
  /** Absent: the last page is shown. */
  load?: () => void;
  loading: boolean;
  label: string;
  loadingLabel: string;
  endNote: ReactNode;
}

export function DataTable<T>({
  rows,
  loading,
  loadingWhat,
  errorNote,
  empty,
  caption,
  testId,
  columns,
  rowKey,
  rowAttributes,
  nextPage,
}: {
  /** Undefined: not loaded yet. */
  rows: readonly T[] | undefined;
  loading?: boolean;
  /** "Loading <what>…" while loading and `rows` is undefined; absent: the page shows its own. */
  loadingWhat?: string;
  /** The page's error note, shown between the loading line and the list. */
  errorNote?: ReactNode;
  /** What an empty list says; null: nothing (e.g. when the error note explains why). */
  empty: ReactNode;
  /** Read by screen readers only. */
  caption: string;
  testId?: string;
  columns: Column<T>[];
  rowKey: (row: T) => string | number;
  rowAttributes?: (row: T) => Record<string, string | number>;
  nextPage?: NextPage;
}) {
  return (
    <>
      {loading && loadingWhat && rows === undefined ? <Loading what={loadingWhat} /> : null}
      {errorNote}
      {rows && rows.length === 0 && empty !== null ? <Empty>{empty}</Empty> : null}
      {rows && rows.length > 0 ? (
        <table className="reflow" data-testid={testId}>
          <caption className="sr-only">{caption}</caption>
          <thead>
            <tr>
              {columns.map((c) => (
                <th key={c.header} scope="col">
                  {c.srOnlyHeader ? <span className="sr-only">{c.header}</span> : c.header}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={rowKey(row)} {...rowAttributes?.(row)}>
                {columns.map((c) => (
                  <td
                    key={c.header}
                    data-label={c.unlabelled ? undefined : c.header}
                    className={c.className}
                    {...c.cellAttributes?.(row)}
                  >
                    {c.cell(row)}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {nextPage?.load ? (
        <button type="button" disabled={nextPage.loading} onClick={nextPage.load}>
          {nextPage.loading ? nextPage.loadingLabel : nextPage.label}
        </button>
      ) : nextPage && rows && rows.length > 0 ? (
        <p className="muted">{nextPage.endNote}</p>
      ) : null}
    </>
  );
}
