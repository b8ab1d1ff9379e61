// The signed-in player's websocket session: one Connection (connection.js) that says hello
// with the player's token, language and error-help setting, reconnects by itself, and shows
// the "offline" banner while it is down. Requests go through request(). What a welcome or a
// pushed message means is not decided here: connect() hands them to the handlers of
// configure() (app.js).
import { Connection } from "./connection.js";
import { $ } from "./dom.js";
import { locale, t } from "./i18n.js";
import { store } from "./store.js";

let conn = null;
let handlers = null;
let welcomed = false;

/**
 * @param {object} on  {welcome(welcome, {again, first}), push(msg), unauthorized()}: `first`
 *   is the first welcome since connect(), `again` a hello repeated on the same socket.
 */
export function configure(on) {
  handlers = on;
}

/** Open the session (closing any before): hello, and again after each reconnection. */
export function connect() {
  if (conn) conn.stop();
  welcomed = false;
  conn = new Connection({
    hello: ({ again = false } = {}) => ({
      token: store.token,
      locale: locale(),
      error_help: store.errorHelp,
      ...(again ? {} : held()),
    }),
    onWelcome: (welcome, { again }) => {
      const first = !welcomed;
      welcomed = true;
      handlers.welcome(welcome, { again, first });
    },
    onPush: (msg) => handlers.push(msg),
    onStatus: (online) => {
      const banner = $("#conn-banner");
      banner.textContent = online ? "" : t("conn.offline");
      banner.hidden = online;
    },
    onUnauthorized: () => handlers.unauthorized(),
  });
  conn.start();
}

/**
 * The game on the table, whose STATE the page holds, for a hello on a new socket: the welcome
 * then names it in `unchanged` instead of sending it again when it has not moved on
 * (docs/protocol.md §3.1). Not on a repeated hello: that one asks for texts in a new language.
 */
function held() {
  const game = store.game;
  return game && game.game_id ? { games: [{ game_id: game.game_id, seq: game.seq }] } : {};
}

/** Forget the session (its token was refused: the connection has stopped by itself). */
export function disconnect() {
  conn = null;
  $("#conn-banner").hidden = true;
}

/** Send a request; resolves with its reply, whatever its type. */
export function request(message) {
  return conn.request(message);
}

/** Say hello again on the open socket (a new language or error-help setting). */
export function rehello() {
  if (conn) conn.rehello();
}

/** The connection (for tests and debugging: to drop it and watch it come back). */
export function connection() {
  return conn;
}

/** The banner in the current language. */
export function relabel() {
  const banner = $("#conn-banner");
  if (!banner.hidden) banner.textContent = t("conn.offline");
}
