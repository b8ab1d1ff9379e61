// Which view the page shows, and the address it shows it at. The views are index.html's
// <section id="view-…">: register, home (the menu), play (the table and the race room),
// invite (a race before joining or watching), leaderboard, profile and replay. Every view lives
// at "/" except a race's, a profile's and a replay's: "/race/<invite>" stays while its room, its
// invite page, or the sign-up before it is shown; "/players/<id>" while that player's profile
// is; "/replay/<game id>" while that game's replay is. What a view draws when it opens is
// registered with onEnter().
import { $ } from "./dom.js";
import { setView, store } from "./store.js";

const VIEWS = ["register", "home", "play", "invite", "leaderboard", "profile", "replay"];
const entering = {};

/** Run `fn` each time `view` is shown. */
export function onEnter(view, fn) {
  entering[view] = fn;
}

export function show(view) {
  setView(view);
  for (const name of VIEWS) $(`#view-${name}`).hidden = name !== view;
  $("#nav-leaderboard").hidden = !store.token;
  if (entering[view]) entering[view]();
  // The race's address stays while its room, its invite page or the sign-up before it is shown.
  const keepPath =
    view === "play" ||
    view === "invite" ||
    view === "profile" ||
    view === "replay" ||
    (view === "register" && store.pendingInvite);
  if (!keepPath && location.pathname !== "/") history.pushState(null, "", "/");
  window.scrollTo(0, 0);
}

/** The race invite in the address ("/race/<invite>"), or null. */
export function inviteInAddress() {
  const m = location.pathname.match(/^\/race\/([^/]+)\/?$/);
  return m ? decodeURIComponent(m[1]) : null;
}

/** The game whose replay the address names ("/replay/<game id>"), or null. */
export function replayInAddress() {
  const m = location.pathname.match(/^\/replay\/([^/]+)\/?$/);
  return m ? decodeURIComponent(m[1]) : null;
}

/** The address of a game's replay. */
export function replayPath(gameId) {
  return `/replay/${encodeURIComponent(gameId)}`;
}

/** The player whose profile the address names ("/players/<id>"), or null. */
export function profileInAddress() {
  const m = location.pathname.match(/^\/players\/([^/]+)\/?$/);
  return m ? decodeURIComponent(m[1]) : null;
}

/** Go to `path` (a new history entry), unless the page is there already. */
export function goTo(path) {
  if (location.pathname !== path) history.pushState(null, "", path);
}

/** Show `path` in place of the current address (no new history entry). */
export function correctAddress(path) {
  if (location.pathname !== path) history.replaceState(null, "", path);
}

/** Call `fn(invite or null)` when the player goes back or forward through the history. */
export function onHistory(fn) {
  window.addEventListener("popstate", () => fn(inviteInAddress()));
}
