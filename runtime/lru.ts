/**
 * A bounded map that forgets the least recently used entry first (a Map keeps insertion order). A hit
 * moves its entry to the young end only when it has aged past half the map's capacity: a hot entry is
 * read without touching the Map's order, and an entry left where it is is still among the `max / 2` most
 * recently used, so it is never the one evicted.
 */
export class Lru<K, V> {
  private readonly map = new Map<K, { value: V; touched: number }>();
  private tick = 0;

  constructor(private readonly max: number) {}

  get(key: K): V | undefined {
    const entry = this.map.get(key);
    if (entry === undefined) return undefined;
    if (this.tick - entry.touched >= this.max >> 1) {
      this.map.delete(key);
      this.map.set(key, entry);
      entry.touched = ++this.tick;
    }
    return entry.value;
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, { value, touched: ++this.tick });
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K);
  }

  delete(key: K): void {
    this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }

  get size(): number {
    return this.map.size;
  }
}
