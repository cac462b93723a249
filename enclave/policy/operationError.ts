/** What an operation's parser throws for input that cannot be signed; callers turn it into their error. */
export class OperationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OperationError";
  }
}
