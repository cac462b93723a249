/** Why an action's imports could not be loaded; `code` is one of the action error codes. */
export type ModuleErrorCode =
  | "import_invalid"
  | "import_not_pinned"
  | "import_integrity_mismatch"
  | "import_fetch_failed"
  | "import_redirect_refused"
  | "import_address_refused"
  | "import_too_large"
  | "import_limit"
  | "import_timeout"
  | "imports_disabled";

export class ModuleError extends Error {
  readonly code: ModuleErrorCode;

  constructor(code: ModuleErrorCode, message: string) {
    super(message);
    this.name = "ModuleError";
    this.code = code;
  }
}
