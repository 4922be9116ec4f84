/**
 * A Deno project of a user, in a temporary directory outside this repository, that uses
 * DenoTriton by the README's local route: `"links"` to this checkout and an import of
 * `jsr:@denotriton/triton` (the same import a JSR user writes). Programs run in it as
 * subprocesses with exactly the permission flags a test gives, under a watchdog.
 *
 * @module
 */

import { fileURLToPath } from "node:url";

/** This checkout's root. */
export const REPO_ROOT: string = fileURLToPath(new URL("../", import.meta.url));

const VERSION: string = JSON.parse(await Deno.readTextFile(`${REPO_ROOT}/deno.json`)).version;

/**
 * The user's `deno.json`, as the README shows it.
 *
 * @param repo The checkout it links.
 * @param compilerOptions The user's own compiler options, if any (else Deno's defaults).
 * @returns The file's text.
 */
export function userDenoJson(
  repo: string = REPO_ROOT,
  compilerOptions?: Readonly<Record<string, boolean>>,
): string {
  return JSON.stringify(
    {
      imports: { "@denotriton/triton": `jsr:@denotriton/triton@^${VERSION}` },
      links: [repo],
      ...(compilerOptions === undefined ? {} : { compilerOptions }),
    },
    null,
    2,
  ) + "\n";
}

const decoder = new TextDecoder();

/** What a finished program printed. */
export interface ProgramOutput {
  /** The exit code. */
  readonly code: number;
  /** Standard output. */
  readonly stdout: string;
  /** Standard error. */
  readonly stderr: string;
}

/** A program that runs in the background: wait for a line, then stop it. */
export class RunningProgram implements AsyncDisposable {
  #child: Deno.ChildProcess;
  #stdout = "";
  #stderr = "";
  #lines: ReadableStreamDefaultReader<string>;
  #done: Promise<ProgramOutput>;

  constructor(child: Deno.ChildProcess) {
    this.#child = child;
    this.#lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    const stderr = (async () => {
      for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
        this.#stderr += chunk;
      }
    })();
    this.#done = (async () => {
      const status = await child.status;
      await stderr;
      return { code: status.code, stdout: this.#stdout, stderr: this.#stderr };
    })();
  }

  /**
   * Reads standard output until a line starts with `prefix`.
   *
   * @param prefix The line's start.
   * @param timeoutMs The watchdog.
   * @returns The rest of that line.
   */
  async waitForLine(prefix: string, timeoutMs = 60_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let buffered = "";
    while (Date.now() < deadline) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const next = await Promise.race([
        this.#lines.read(),
        new Promise<"timeout">((resolve) =>
          timer = setTimeout(() => resolve("timeout"), deadline - Date.now())
        ),
      ]);
      clearTimeout(timer);
      if (next === "timeout") break;
      if (next.done) {
        const out = await this.#done;
        throw new Error(
          `The program exited (code ${out.code}) before printing '${prefix}':\n${out.stderr}`,
        );
      }
      this.#stdout += next.value;
      buffered += next.value;
      for (const line of buffered.split("\n").slice(0, -1)) {
        if (line.startsWith(prefix)) return line.slice(prefix.length).trim();
      }
      buffered = buffered.slice(buffered.lastIndexOf("\n") + 1);
    }
    this.#child.kill("SIGKILL");
    throw new Error(`Timed out waiting for '${prefix}':\n${(await this.#done).stderr}`);
  }

  /**
   * Waits for the program to exit (killing it after the watchdog).
   *
   * @param timeoutMs The watchdog.
   * @returns Exit code and output.
   */
  async exited(timeoutMs = 60_000): Promise<ProgramOutput> {
    // Keep reading stdout so the program never blocks on a full pipe.
    const drain = (async () => {
      for (;;) {
        const { value, done } = await this.#lines.read();
        if (done) return;
        this.#stdout += value;
      }
    })();
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), timeoutMs);
    try {
      const out = await this.#done;
      await drain;
      return { ...out, stdout: this.#stdout };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Sends a signal.
   *
   * @param signal The signal.
   */
  kill(signal: Deno.Signal = "SIGTERM"): void {
    try {
      this.#child.kill(signal);
    } catch {
      // Exited already.
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.kill("SIGKILL");
    await this.exited();
  }
}

/** A user project in a temporary directory. */
export class UserProject implements AsyncDisposable {
  /** Its directory. */
  readonly dir: string;

  private constructor(dir: string) {
    this.dir = dir;
  }

  /**
   * Creates the project: a temporary directory with the README's `deno.json`.
   *
   * @param compilerOptions The user's compiler options, if any (else Deno's defaults).
   * @returns The project; dispose it to delete the directory.
   */
  static async create(
    compilerOptions?: Readonly<Record<string, boolean>>,
  ): Promise<UserProject> {
    const dir = await Deno.makeTempDir({ prefix: "denotriton-user-" });
    if (dir.startsWith(REPO_ROOT)) throw new Error(`${dir} is inside the repository`);
    await Deno.writeTextFile(`${dir}/deno.json`, userDenoJson(REPO_ROOT, compilerOptions));
    return new UserProject(dir);
  }

  /**
   * Writes a file into the project.
   *
   * @param name The file name.
   * @param text Its content.
   */
  async write(name: string, text: string): Promise<void> {
    await Deno.writeTextFile(`${this.dir}/${name}`, text);
  }

  #command(args: readonly string[], env: Record<string, string>): Deno.Command {
    return new Deno.Command(Deno.execPath(), {
      args: [...args],
      cwd: this.dir,
      env: { NO_COLOR: "1", ...env },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    });
  }

  /**
   * Starts `deno <args>` in the project.
   *
   * @param args E.g. `["run", "--no-prompt", "--allow-net", "server.ts"]`.
   * @param env Extra environment variables.
   * @returns The running program.
   */
  spawn(args: readonly string[], env: Record<string, string> = {}): RunningProgram {
    return new RunningProgram(this.#command(args, env).spawn());
  }

  /**
   * Runs `deno <args>` in the project to its end.
   *
   * @param args E.g. `["run", "--no-prompt", "main.ts"]`.
   * @param env Extra environment variables.
   * @returns Exit code and output.
   */
  async run(args: readonly string[], env: Record<string, string> = {}): Promise<ProgramOutput> {
    return await this.spawn(args, env).exited();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await Deno.remove(this.dir, { recursive: true });
  }
}

/** Deno's output lines, without blank ones. */
export function linesOf(text: string): string[] {
  return text.split("\n").map((line) => line.trimEnd()).filter((line) => line !== "");
}

/** Whether the text holds a stack trace line. */
export function hasStackTrace(text: string): boolean {
  return linesOf(text).some((line) => /^\s+at /.test(line));
}

export { decoder };
