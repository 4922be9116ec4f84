/**
 * Triton's trace file (mode `triton`): a JSON array of trace records. Traces gather in memory
 * and are written as Triton 2.51's `TraceFile` writes them: with `log_frequency` N, every N
 * traces go to a file of their own, `<file>.<index>` (index from 0); once `trace_count` is used
 * up, the traces collected so far go to the next indexed file too; otherwise (`log_frequency`
 * 0) they are appended to `<file>` itself when their setting is replaced or the server stops,
 * and the array is closed when the server stops.
 *
 * @module
 */

/** One trace file path, shared by every setting that names it. */
export class TraceFile {
  /** The path. */
  readonly path: string;
  #index = 0;
  #file: Deno.FsFile | undefined;
  #encoder = new TextEncoder();

  /**
   * A trace file.
   *
   * @param path Its path.
   */
  constructor(path: string) {
    this.path = path;
  }

  /**
   * Writes traces (records joined by commas, without brackets).
   *
   * @param records The records.
   * @param indexed To the next `<file>.<index>` as an array of its own, else appended to the
   *   file's array.
   */
  save(records: string, indexed: boolean): void {
    if (indexed) {
      Deno.writeTextFileSync(`${this.path}.${this.#index++}`, `[${records}]`);
      return;
    }
    if (this.#file === undefined) {
      this.#file = Deno.openSync(this.path, { write: true, create: true, truncate: true });
      this.#file.writeSync(this.#encoder.encode(`[${records}`));
    } else {
      this.#file.writeSync(this.#encoder.encode(`,${records}`));
    }
  }

  /** Closes the file's array (when anything was appended). */
  close(): void {
    if (this.#file === undefined) return;
    this.#file.writeSync(this.#encoder.encode("]"));
    this.#file.close();
    this.#file = undefined;
  }
}
