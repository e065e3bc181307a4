/**
 * Exit statuses of `rl`, for CI: 0 done (or nothing to do), 1 an error (unreachable server, bad
 * credentials, unknown policy, a server fault, bad usage), 2 a conflict or invalid input (409, 400, 422,
 * or files that fail validation): something a person must look at before trying again.
 */
export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_CONFLICT_OR_INVALID = 2;

/** A failure the CLI itself detected, with the status to exit with and extra lines to print. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_ERROR,
    readonly details: string[] = [],
    /** Machine-readable extras for `--json` (merged into the error object). */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Bad input caught before any call (a flag's value, an argument): exit 2, as the server's 400 would be. */
export function invalidInput(message: string): CliError {
  return new CliError(message, EXIT_CONFLICT_OR_INVALID);
}
