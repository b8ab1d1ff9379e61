// The websocket to /ws (docs/protocol.md): hello first, requests with ids, pushed race
// messages, and automatic reconnection. Requests still unanswered when the socket drops are
// sent again after the next welcome: the server recognises a repeated action (same seq and
// content) and answers it as applied, and answers a stale seq with the current state.

// Reconnection delays by attempt; each is jittered down by up to JITTER of itself, so pages cut
// off together (a server restarted, a network blip) do not come back together. A hello answered
// `server_busy` waits at least the `retry_after_ms` it was given, jittered up by up to JITTER.
// (server/bench/storm.py reconnects its simulated pages with the same schedule.)
const BACKOFF_MS = [250, 500, 1000, 2000, 4000, 8000];
const JITTER = 0.5;

/** The wait (ms) before reconnection number `attempt` (0 first), given a server's retry time. */
export function reconnectDelay(attempt, retryAfterMs = null, random = Math.random) {
  const step = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
  let delay = step * (1 - JITTER * random());
  if (retryAfterMs !== null && retryAfterMs !== undefined) {
    delay = Math.max(delay, retryAfterMs * (1 + JITTER * random()));
  }
  return delay;
}
const KEEPALIVE_MS = 25000;

export class Connection {
  /**
   * @param {object} opts
   * @param {({again}) => object} opts.hello  the hello fields: {token, locale, error_help, games?};
   *   `again`: a hello repeated on the open socket
   * @param {(welcome: object) => void} opts.onWelcome  after every successful hello
   * @param {(msg: object) => void} opts.onPush         messages that answer no request
   * @param {(online: boolean) => void} opts.onStatus   connection up or down
   * @param {() => void} opts.onUnauthorized            the token is unknown to the server
   */
  constructor(opts) {
    this.opts = opts;
    this.ws = null;
    this.ready = false; // hello answered with welcome
    this.nextId = 1;
    this.pending = new Map(); // id -> {message, resolve, reject, sent}
    this.order = []; // ids in the order they were requested
    this.attempt = 0;
    this.retryAfterMs = null; // the retry time of a hello answered server_busy
    this.timer = null;
    this.keepalive = null;
    this.stopped = false;
    this.welcomes = 0; // successful hellos on new sockets (1 + the number of reconnections)
  }

  start() {
    this.stopped = false;
    this._open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.keepalive);
    if (this.ws) this.ws.close(1000, "bye");
    this.ws = null;
    this.ready = false;
  }

  /** Drop the socket now (tests and the "reconnect" path use it); it reconnects by itself. */
  drop() {
    if (this.ws) this.ws.close(4000, "client reconnect");
  }

  /** Send a request; resolves with its reply (whatever its type, errors included). */
  request(message) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { message: { ...message, id }, resolve, reject, sent: false });
      this.order.push(id);
      if (this.ready) this._send(id);
    });
  }

  /** Send hello again on the open socket (a locale or error-help change). */
  async rehello() {
    if (!this.ready) return null;
    const reply = await this._raw({ type: "hello", ...this.opts.hello({ again: true }) });
    if (reply.type === "welcome") this.opts.onWelcome(reply, { again: true });
    return reply;
  }

  _url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}/ws`;
  }

  _open() {
    if (this.stopped) return;
    let ws;
    try {
      ws = new WebSocket(this._url());
    } catch (err) {
      this._retry();
      return;
    }
    this.ws = ws;
    this.ready = false;
    ws.addEventListener("open", () => this._hello(ws));
    ws.addEventListener("message", (ev) => this._receive(ev.data));
    ws.addEventListener("close", () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.ready = false;
      clearInterval(this.keepalive);
      for (const [id, entry] of this.pending) {
        if (entry.raw) {
          this.pending.delete(id);
          entry.resolve({ type: "error", code: "offline" });
        } else {
          entry.sent = false;
        }
      }
      this.opts.onStatus(false);
      this._retry();
    });
    ws.addEventListener("error", () => {
      /* the close event follows */
    });
  }

  _retry() {
    if (this.stopped) return;
    const delay = reconnectDelay(this.attempt, this.retryAfterMs);
    this.retryAfterMs = null;
    this.attempt += 1;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this._open(), delay);
  }

  async _hello(ws) {
    const reply = await this._raw({ type: "hello", ...this.opts.hello() }, ws);
    if (this.ws !== ws) return;
    if (reply.type === "error" && reply.code === "unauthorized") {
      this.stop();
      this.opts.onUnauthorized();
      return;
    }
    if (reply.type !== "welcome") {
      if (reply.code === "server_busy") this.retryAfterMs = reply.retry_after_ms ?? null;
      ws.close(4001, "hello failed");
      return;
    }
    this.attempt = 0;
    this.ready = true;
    this.welcomes += 1;
    this.opts.onStatus(true);
    clearInterval(this.keepalive);
    this.keepalive = setInterval(() => {
      if (this.ready) this._raw({ type: "ping" }).catch(() => {});
    }, KEEPALIVE_MS);
    await this.opts.onWelcome(reply, { again: false });
    // Requests made while offline, or sent but unanswered when the socket dropped.
    for (const id of this.order) if (this.pending.has(id)) this._send(id);
  }

  /** A request outside the retry queue (hello and pings belong to one socket only). */
  _raw(message, ws = this.ws) {
    const id = `c${this.nextId++}`;
    return new Promise((resolve) => {
      this.pending.set(id, { message: { ...message, id }, resolve, reject: () => {}, sent: true, raw: true });
      try {
        ws.send(JSON.stringify({ ...message, id }));
      } catch (err) {
        this.pending.delete(id);
        resolve({ type: "error", code: "offline" });
      }
    });
  }

  _send(id) {
    const entry = this.pending.get(id);
    if (!entry || entry.sent || !this.ws || !this.ready) return;
    entry.sent = true;
    this.ws.send(JSON.stringify(entry.message));
  }

  _receive(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch (err) {
      return;
    }
    if (msg.type === "error" && msg.code === "rate_limited" && msg.id !== undefined && this.pending.has(msg.id)) {
      // Dropped unread by the server's rate limit: send the same request again shortly.
      const entry = this.pending.get(msg.id);
      if (entry.raw) {
        this.pending.delete(msg.id);
        entry.resolve(msg);
      } else {
        entry.sent = false;
        setTimeout(() => this._send(msg.id), 300);
      }
      return;
    }
    if (msg.id !== undefined && this.pending.has(msg.id)) {
      const entry = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      this.order = this.order.filter((x) => x !== msg.id);
      entry.resolve(msg);
      return;
    }
    if (msg.type === "error" && msg.code === "rate_limited") {
      // (Servers that do not echo the id.) The request it answers was dropped unread: it is
      // the oldest one still unanswered, since replies come in request order.
      const id = this.order.find((x) => this.pending.has(x) && this.pending.get(x).sent);
      if (id !== undefined) {
        this.pending.get(id).sent = false;
        setTimeout(() => this._send(id), 300);
      }
      return;
    }
    this.opts.onPush(msg);
  }
}
