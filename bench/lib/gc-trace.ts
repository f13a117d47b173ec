/**
 * What a process allocated on V8's heap, read from its `--trace-gc` lines: each collection prints the heap's
 * size when it began and when it ended (`Scavenge 41.2 (57.9) -> 12.3 (58.1) MB, …`), so what was allocated
 * between two collections is the size at the start of the later one less the size at the end of the earlier
 * one. Summed over a run, that is the bytes the process allocated (to a tenth of a MB per collection, and
 * without what it allocated after its last collection).
 */
const GC_LINE = /: (?:Scavenge|Minor Mark-Compact|Mark-Compact|Mark-Compact \(reduce\)|Mark-sweep)[^\d]*?([\d.]+) \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB/;

const MB = 1024 * 1024;

export class AllocationTally {
  #bytes = 0;
  #afterLast: number | undefined;
  #collections = 0;

  /** Takes a line of the process's output; true if it was a `--trace-gc` line (counted). */
  add(line: string): boolean {
    const match = GC_LINE.exec(line);
    if (!match) return false;
    const before = Number(match[1]) * MB;
    const after = Number(match[2]) * MB;
    // The first collection's start counts from an empty heap: the process's start-up allocation.
    this.#bytes += Math.max(0, before - (this.#afterLast ?? 0));
    this.#afterLast = after;
    this.#collections++;
    return true;
  }

  /** Bytes allocated up to the last collection seen, or undefined before any (no `--trace-gc`, or none yet). */
  get bytes(): number | undefined {
    return this.#collections === 0 ? undefined : this.#bytes;
  }
}
