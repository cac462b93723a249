/**
 * Every item of a paginated list, page by page (page_number from 0, page_size up to the service's
 * maximum), as an async iterator: `for await (const pkp of paginate(...))`. Stops at the first short
 * page or once `total` items were seen, whichever comes first.
 */
export interface Page<T> {
  items: T[];
  page_number: number;
  page_size: number;
  total: number;
}

export async function* paginate<T>(
  fetchPage: (pageNumber: number, pageSize: number) => Promise<Page<T>>,
  pageSize = 100,
): AsyncGenerator<T, void, undefined> {
  let seen = 0;
  for (let pageNumber = 0; ; pageNumber++) {
    const page = await fetchPage(pageNumber, pageSize);
    for (const item of page.items) yield item;
    seen += page.items.length;
    if (page.items.length < pageSize || seen >= page.total) return;
  }
}
