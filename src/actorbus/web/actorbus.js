// actorbus.js: the JavaScript client of actorbus's J.REP gateway (docs/jrep.md).
//
// One ES module, no dependency, no build step:
//
//   import { ActorBus } from "/actorbus.js";
//   const bus = await ActorBus.connect("ws://host:8080/jrep", { token });
//   const off = bus.subscribe("shop.Price", "/prices/eur", (value) => ..., (state) => ...);
//   bus.publish("shop.Order", "/orders", { sku: "R-1", price: "9.90" });
//   const quote = await bus.request("shop.Quote", "/quote", { sku: "R-1" });
//   for await (const reply of bus.requestAll("shop.Stats", "/stats", {})) { ... }
//   bus.serve("shop.Add", "/add", ({ a, b }) => ({ total: a + b }));
//   bus.close();
//
// The client reconnects after a lost connection (exponential backoff) and
// states again everything it subscribed to and serves; subscribers see "DOWN"
// meanwhile.  A request in flight when the connection drops fails.

/**
 * @typedef {Object} ConnectOptions
 * @property {string} [token] the gateway's token (sent as the `token` query parameter)
 * @property {{initialDelay?: number, maxDelay?: number} | false} [reconnect]
 *   backoff in milliseconds (default 500 .. 10000); `false`: do not reconnect
 * @property {typeof WebSocket} [WebSocket] the WebSocket class (default: the global one)
 */

/**
 * @typedef {Object} ReplyMessage
 * @property {string | undefined} type the reply's type name
 * @property {Object} value its fields (`status`, `reason` included)
 * @property {number} remaining repliers still to answer: 0 on the last message
 * @property {string | undefined} error the ErrorMessage of an ERROR reply (or NoReplier)
 * @property {Object} message the J.REP message as received
 */

/**
 * @typedef {Object} BusErrorInfo
 * @property {string} code the ErrorCode (`BadValue`, `Refused`, ...)
 * @property {string} message the ErrorMessage
 * @property {string} [subject] the refused message's ToSubject
 * @property {string} [commandType] its CommandType
 * @property {string} [replyTo] its ReplyTo
 */

/** An error of the bus: a refused message, an ERROR reply, a lost connection. */
export class BusError extends Error {
  /** @param {string} message @param {string} [code] */
  constructor(message, code) {
    super(message);
    this.name = "BusError";
    /** @type {string | undefined} */
    this.code = code;
  }
}

const SERVER = "ServerBus";
const CLIENT = "ClientBus";
const ERRORS = "ClientBusErrors";
const keyOf = (/** @type {string} */ type, /** @type {string} */ subject) => `${type}\u0000${subject}`;

/** A connection to a J.REP gateway. */
export class ActorBus {
  /**
   * Connect, exchange state (ConnectToQueue ... FinishStateSync) and resolve once
   * data may flow.  Rejects if the first connection fails.
   * @param {string} url the gateway's WebSocket URL (`ws://host:port/jrep`)
   * @param {ConnectOptions} [options]
   * @returns {Promise<ActorBus>}
   */
  static async connect(url, options = {}) {
    const bus = new ActorBus(url, options);
    await bus._open();
    return bus;
  }

  /** @param {string} url @param {ConnectOptions} options */
  constructor(url, options) {
    const target = new URL(url, globalThis.location?.href);
    if (options.token !== undefined) target.searchParams.set("token", options.token);
    this.url = target.toString();
    this.backoff = options.reconnect === false ? null : { initialDelay: 500, maxDelay: 10000, ...options.reconnect };
    this.WebSocket = options.WebSocket ?? globalThis.WebSocket;
    /** "connecting" | "active" | "closed" */
    this.status = "connecting";
    /** this session's private prefix (changes on every connection) */
    this.replyPrefix = "";
    /** @type {WebSocket | null} */
    this.ws = null;
    this.subscriptions = new Map(); // key -> {type, subject, state, listeners: Set}
    this.servers = new Map(); // key -> {type, subject, handler, replyType}
    this.requests = new Map(); // ReplyTo -> {push(ReplyMessage), fail(Error)}
    this.incoming = new Map(); // ReplyTo -> AbortController, for requests the bus sent us
    /** @type {Set<(error: BusErrorInfo) => void>} */
    this.errorListeners = new Set();
    this.counter = 0;
    this.attempt = 0;
    this.timers = /** @type {any[]} */ ([]);
  }

  // ------------------------------------------------------------- connection
  /** @returns {Promise<void>} */
  _open() {
    return new Promise((resolve, reject) => {
      const ws = new this.WebSocket(this.url);
      this.ws = ws;
      let synced = false;
      ws.onopen = () => this._send([{ ToSubject: SERVER, CommandType: "ConnectToQueue" }]);
      ws.onmessage = (event) => {
        this.lastReceived = Date.now();
        let messages;
        try {
          messages = JSON.parse(event.data);
        } catch {
          return;
        }
        for (const m of messages) {
          if (m.ToSubject === CLIENT && m.CommandType === "FinishStateSync" && !synced) {
            synced = true;
            this._finishSync();
            resolve();
          } else this._dispatch(m);
        }
      };
      ws.onclose = () => {
        if (this.ws !== ws) return;
        this._lost();
        if (!synced) reject(new BusError(`cannot connect to ${this.url}`, "Disconnected"));
        if (this.status !== "closed" && (synced || this.attempt > 0) && this.backoff) this._retry();
      };
    });
  }

  _finishSync() {
    const messages = [];
    for (const s of this.subscriptions.values()) messages.push(this._verb("RemoteSubscribe", s));
    for (const s of this.servers.values()) messages.push(this._verb("RemoteSubscribe", s));
    messages.push({ ToSubject: SERVER, CommandType: "FinishStateSync" });
    this._send(messages);
    this.status = "active";
    this.attempt = 0;
    this._startHeartbeats();
  }

  _startHeartbeats() {
    const { heartbeat = 0, idle = 0 } = this.timing ?? {};
    const every = Math.min(...[heartbeat, idle / 3].filter((t) => t > 0), 20000);
    this.timers.push(
      setInterval(() => {
        const ws = this.ws;
        if (!ws) return;
        if (Date.now() - (this.lastSent ?? 0) >= every) this._send([{ ToSubject: SERVER, CommandType: "Heartbeat" }]);
        // a gateway that sends heartbeats and has been silent for three of them is gone
        if (heartbeat > 0 && Date.now() - (this.lastReceived ?? 0) > 3 * heartbeat) ws.close();
      }, Math.max(every / 2, 50)),
    );
  }

  _lost() {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    this.ws = null;
    if (this.status !== "closed") this.status = "connecting";
    for (const s of this.subscriptions.values()) this._state(s, "DOWN");
    for (const r of [...this.requests.values()]) r.fail(new BusError("the connection to the gateway was lost", "Disconnected"));
    this.requests.clear();
    for (const c of this.incoming.values()) c.abort();
    this.incoming.clear();
  }

  _retry() {
    const { initialDelay, maxDelay } = /** @type {{initialDelay: number, maxDelay: number}} */ (this.backoff);
    const delay = Math.min(maxDelay, initialDelay * 2 ** this.attempt++);
    this.retryTimer = setTimeout(() => {
      if (this.status !== "closed") this._open().catch(() => {});
    }, delay);
  }

  /** @param {Object[]} messages */
  _send(messages) {
    if (!this.ws || this.ws.readyState !== 1) return false;
    this.ws.send(JSON.stringify(messages));
    this.lastSent = Date.now();
    return true;
  }

  /** @param {string} verb @param {{type: string, subject: string}} key */
  _verb(verb, { type, subject }) {
    return { ToSubject: SERVER, CommandType: verb, Subject: subject, Type: type };
  }

  /** @param {Object[]} messages */
  _data(messages) {
    if (this.status !== "active") throw new BusError("not connected to the gateway (reconnecting or closed)", "Disconnected");
    this._send(messages);
  }

  // ------------------------------------------------------------- incoming
  /** @param {any} m */
  _dispatch(m) {
    const to = m.ToSubject;
    if (to === CLIENT) {
      if (m.CommandType === "CapabilitiesNotice") {
        this.replyPrefix = m.ReplyPrefix;
        this.timing = { heartbeat: m.HeartbeatDelay ?? 0, idle: m.IdleTimeout ?? 0 };
      } else if (m.CommandType === "FeedState") {
        const s = this.subscriptions.get(keyOf(m.Type, m.Subject));
        if (s) this._state(s, m.State);
      } else if (m.CommandType === "Cancel") {
        this.incoming.get(m.Subject)?.abort();
        this.incoming.delete(m.Subject);
      }
    } else if (to === ERRORS) {
      /** @type {BusErrorInfo} */
      const info = { code: m.ErrorCode, message: m.ErrorMessage, subject: m.Subject, commandType: m.CommandType, replyTo: m.ReplyTo };
      const request = m.ReplyTo && this.requests.get(m.ReplyTo);
      if (request) {
        this.requests.delete(m.ReplyTo);
        request.fail(new BusError(`${info.code}: ${info.message}`, info.code));
      }
      for (const cb of this.errorListeners) cb(info);
    } else if (this.requests.has(to)) {
      this.requests.get(to).push({ type: m.Type, value: m.Value ?? {}, remaining: m.Remaining ?? 0, error: m.ErrorMessage, message: m });
    } else if (m.ReplyTo !== undefined) {
      const server = this.servers.get(keyOf(m.Type, to));
      if (server) this._answer(server, m);
    } else {
      const s = this.subscriptions.get(keyOf(m.Type, to));
      if (s) for (const l of [...s.listeners]) l.onMessage?.(m.Value ?? {}, m);
    }
  }

  /** @param {any} s @param {string} state */
  _state(s, state) {
    if (s.state === state) return;
    s.state = state;
    for (const l of [...s.listeners]) l.onState?.(state);
  }

  // ------------------------------------------------------------- the API
  /**
   * Subscribe to `(type, subject)`.  `onMessage(value, message)` gets each
   * notification's fields; `onState("UP" | "DOWN")` the feed's state.
   * @param {string} type the type name @param {string} subject
   * @param {(value: any, message: any) => void} [onMessage]
   * @param {(state: "UP" | "DOWN") => void} [onState]
   * @returns {() => void} unsubscribe
   */
  subscribe(type, subject, onMessage, onState) {
    const key = keyOf(type, subject);
    let s = this.subscriptions.get(key);
    if (!s) {
      s = { type, subject, state: "DOWN", listeners: new Set() };
      this.subscriptions.set(key, s);
      if (this.status === "active") this._send([this._verb("RemoteSubscribe", s)]);
    }
    const listener = { onMessage, onState };
    s.listeners.add(listener);
    if (s.state === "UP") onState?.("UP");
    const sub = s;
    return () => {
      if (!sub.listeners.delete(listener) || sub.listeners.size) return;
      this.subscriptions.delete(key);
      if (this.status === "active") this._send([this._verb("RemoteUnsubscribe", sub)]);
    };
  }

  /**
   * Publish a notification.  Throws while not connected.
   * @param {string} type @param {string} subject @param {Object} value its fields
   */
  publish(type, subject, value) {
    this._data([{ ToSubject: subject, Type: type, Value: value }]);
  }

  /**
   * Send a request; every reply of every replier as it comes, until none is
   * left (`remaining` 0).  An ERROR reply is yielded (its `error` set); a refusal
   * or a lost connection throws.  `cancel()` (or `break`, or the signal) cancels.
   * @param {string} type @param {string} subject @param {Object} value
   * @param {{signal?: AbortSignal}} [options]
   * @returns {AsyncIterableIterator<ReplyMessage> & {cancel: () => void}}
   */
  requestAll(type, subject, value, { signal } = {}) {
    const replyTo = `${this.replyPrefix}/r${++this.counter}`;
    /** @type {ReplyMessage[]} */
    const queue = [];
    /** @type {Error | null} */
    let failure = null;
    let done = false;
    /** @type {(() => void) | null} */
    let wake = null;
    const settle = () => {
      wake?.();
      wake = null;
    };
    const end = () => {
      done = true;
      this.requests.delete(replyTo);
      settle();
    };
    const cancel = () => {
      if (done) return;
      end();
      this._send([{ ToSubject: SERVER, CommandType: "Cancel", Subject: replyTo }]);
    };
    this.requests.set(replyTo, {
      push: (/** @type {ReplyMessage} */ reply) => {
        queue.push(reply);
        if (reply.remaining === 0) end();
        settle();
      },
      fail: (/** @type {Error} */ error) => {
        failure = error;
        end();
      },
    });
    if (signal?.aborted) failure = new BusError("aborted", "Aborted");
    signal?.addEventListener("abort", () => {
      failure ??= new BusError("aborted", "Aborted");
      cancel();
    });
    try {
      if (!failure) this._data([{ ToSubject: subject, Type: type, ReplyTo: replyTo, Value: value }]);
    } catch (error) {
      failure = /** @type {Error} */ (error);
      end();
    }
    const iterator = {
      /** @returns {Promise<IteratorResult<ReplyMessage>>} */
      async next() {
        while (!queue.length && !done && !failure) await new Promise((r) => (wake = () => r(undefined)));
        if (queue.length) return { value: /** @type {ReplyMessage} */ (queue.shift()), done: false };
        if (failure) throw failure;
        return { value: undefined, done: true };
      },
      async return() {
        cancel();
        return { value: undefined, done: /** @type {true} */ (true) };
      },
      cancel,
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }

  /**
   * Send a request and resolve with its final reply (the last one of the
   * stream); rejects with a BusError on an ERROR reply, no replier, a refusal.
   * @param {string} type @param {string} subject @param {Object} value
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<ReplyMessage>}
   */
  async request(type, subject, value, options) {
    let last = null;
    for await (const reply of this.requestAll(type, subject, value, options)) last = reply;
    if (!last) throw new BusError("the request ended without a reply", "NoReply");
    if (last.error !== undefined) throw new BusError(last.error, last.message.ErrorCode ?? "Error");
    return last;
  }

  /**
   * Answer the requests of `(type, subject)`.  `handler(value, {signal, message})`
   * returns the final reply's fields (or a promise of them); a generator (sync
   * or async) streams: each value it yields is an OK_CONTINUING reply, what it
   * returns the final one.  A throw is an ERROR reply carrying its message.
   * `signal` aborts when the requestor cancels.
   * @param {string} type the request's type name @param {string} subject
   * @param {(value: any, context: {signal: AbortSignal, message: any}) => any} handler
   * @param {{replyType?: string}} [options] the reply's type name (default: the request's only one)
   * @returns {() => void} stop serving
   */
  serve(type, subject, handler, { replyType } = {}) {
    const key = keyOf(type, subject);
    const server = { type, subject, handler, replyType };
    this.servers.set(key, server);
    if (this.status === "active") this._send([this._verb("RemoteSubscribe", server)]);
    return () => {
      if (this.servers.get(key) !== server) return;
      this.servers.delete(key);
      if (this.status === "active") this._send([this._verb("RemoteUnsubscribe", server)]);
    };
  }

  /** @param {any} server @param {any} m */
  async _answer(server, m) {
    const replyTo = m.ReplyTo;
    const controller = new AbortController();
    this.incoming.set(replyTo, controller);
    const reply = (/** @type {any} */ value, /** @type {string} */ status, /** @type {string | undefined} */ type = server.replyType) => {
      if (controller.signal.aborted) return;
      const out = { ToSubject: replyTo, Value: { ...value, status } };
      if (type) Object.assign(out, { Type: type });
      this._send([out]);
    };
    try {
      let result = await server.handler(m.Value ?? {}, { signal: controller.signal, message: m });
      if (result && typeof result.next === "function") {
        const stream = result;
        for (;;) {
          const step = await stream.next();
          if (step.done) {
            result = step.value;
            break;
          }
          reply(step.value, "OK_CONTINUING");
        }
        if (result === undefined) return reply({}, "OK_FINAL", "actorbus.Reply");
      }
      reply(result ?? {}, "OK_FINAL");
    } catch (error) {
      if (!controller.signal.aborted) this._send([{ ToSubject: replyTo, ErrorMessage: String(/** @type {any} */ (error)?.message ?? error) }]);
    } finally {
      this.incoming.delete(replyTo);
    }
  }

  /**
   * `cb(error)` for every message the gateway refused (ClientBusErrors).
   * @param {(error: BusErrorInfo) => void} cb @returns {() => void} stop listening
   */
  onError(cb) {
    this.errorListeners.add(cb);
    return () => this.errorListeners.delete(cb);
  }

  /** Say goodbye and close; no reconnect. */
  close() {
    if (this.status === "closed") return;
    this._send([{ ToSubject: SERVER, CommandType: "Disconnect", Reason: "client closing" }]);
    this.status = "closed";
    clearTimeout(this.retryTimer);
    const ws = this.ws;
    this._lost();
    ws?.close(1000);
  }
}

export default ActorBus;
