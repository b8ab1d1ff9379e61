// Which view the page shows, and the address it shows it at. The views are index.html's
// <section id="view-…">: register, home (the menu), play (the table and the race room),
// invite (a race before joining or watching), leaderboard, profile, replay, following and
// queue (waiting for a quick race, over the menu's address: a wait ends with the page). Every
// other view has
// an address of its own, so that Back and Forward move between views, a reload shows the same
// view and a link can be shared (the server serves the page at each, server/web/app.py):
// "/" the menu, "/daily/<date>" a date's leaderboard, "/boards/week/<YYYY-Www>" and
// "/boards/month/<YYYY-MM>" a week's and a month's board, "/games/<id>" a game at the table (one's
// own), "/race/<invite>" a race's room, its invite page or the sign-up before it,
// "/players/<id>" a profile, "/replay/<game id>" a replay, "/following" the players I follow,
// "/ladder/<E|C>" a rule set's ladder of ratings, and "/settings" the settings panel
// (over the menu when opened from its address). The views set their address as they open;
// showing the menu sets "/". What a view draws when it opens is registered with onEnter().
import { $ } from "./dom.js";
import { setView, store } from "./store.js";

const VIEWS = ["register", "home", "play", "invite", "leaderboard", "profile", "replay", "following", "queue", "ladder"];
const entering = {};
const leaving = {};

/** Run `fn` each time `view` is shown. */
export function onEnter(view, fn) {
  entering[view] = fn;
}

/** Run `fn` each time another view replaces `view`. */
export function onLeave(view, fn) {
  leaving[view] = fn;
}

let shownPath = location.pathname; // the address of the view shown (not the settings')

/** The address of the view shown: "/settings" is the panel's, over the view at this one. */
export function viewPath() {
  return shownPath;
}

/** Show `view`; the menu's address is "/" unless `keepAddress` (a game there is resumed). */
export function show(view, { keepAddress = false } = {}) {
  const was = store.view;
  setView(view);
  if (was !== view && leaving[was]) leaving[was]();
  for (const name of VIEWS) $(`#view-${name}`).hidden = name !== view;
  $("#nav-leaderboard").hidden = !store.token;
  if (entering[view]) entering[view]();
  // The menu is at "/", or under the settings panel opened from its address.
  if (view === "home" && !keepAddress && !settingsInAddress()) goTo("/");
  window.scrollTo(0, 0);
}

/** The date whose leaderboard the address names ("/daily/<YYYY-MM-DD>"), or null. */
export function dailyInAddress() {
  const m = location.pathname.match(/^\/daily\/(\d{4}-\d{2}-\d{2})\/?$/);
  return m ? m[1] : null;
}

/** The address of a date's leaderboard. */
export function dailyPath(date) {
  return `/daily/${date}`;
}

/**
 * The week's or month's board the address names ("/boards/week/2026-W49",
 * "/boards/month/2026-12") as {kind, period}, or null. The period is as written: whether such a
 * week or month exists is the board's to check (period-board.js periodStart()).
 */
export function boardInAddress() {
  const m = location.pathname.match(/^\/boards\/(week|month)\/([^/]+)\/?$/);
  return m ? { kind: m[1], period: decodeURIComponent(m[2]) } : null;
}

/** The address of a week's or a month's board ("week" or "month", "2026-W49" or "2026-12"). */
export function boardPath(kind, period) {
  return `/boards/${kind}/${encodeURIComponent(period)}`;
}

/** The game the address puts on the table ("/games/<id>"), or null. */
export function gameInAddress() {
  const m = location.pathname.match(/^\/games\/(\d+)\/?$/);
  return m ? Number(m[1]) : null;
}

/** The address of a game at the table. */
export function gamePath(gameId) {
  return `/games/${gameId}`;
}

/** The rule set whose ladder the address names ("/ladder/E" or "/ladder/C"), or null. */
export function ladderInAddress() {
  const m = location.pathname.match(/^\/ladder\/([EC])\/?$/);
  return m ? m[1] : null;
}

/** The address of a rule set's ladder. */
export function ladderPath(rules) {
  return `/ladder/${rules}`;
}

/** Whether the address is the Following page's ("/following"). */
export function followingInAddress() {
  return /^\/following\/?$/.test(location.pathname);
}

/** Whether the address is the settings panel's ("/settings"). */
export function settingsInAddress() {
  return /^\/settings\/?$/.test(location.pathname);
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
  shownPath = path;
}

/** Show `path` in place of the current address (no new history entry). */
export function correctAddress(path) {
  if (location.pathname !== path) history.replaceState(null, "", path);
  shownPath = path;
}

/** The settings panel's address: a new entry when it opens, gone again when it closes. */
export function settingsAddress(open) {
  if (open && !settingsInAddress()) history.pushState({ settings: true }, "", "/settings");
  else if (!open && settingsInAddress()) {
    // Opened here: back to the view under it. Opened from its address: the menu is under it.
    if (history.state && history.state.settings) history.back();
    else correctAddress("/");
  }
}

/**
 * Call `fn(changed)` when the player goes back or forward through the history: `changed`
 * says whether the view's address is another than the one shown (it is not when only the
 * settings panel opened or closed).
 */
export function onHistory(fn) {
  window.addEventListener("popstate", () => {
    const changed = !settingsInAddress() && location.pathname !== shownPath;
    if (!settingsInAddress()) shownPath = location.pathname;
    fn(changed);
  });
}
