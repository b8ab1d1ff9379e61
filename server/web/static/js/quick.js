// Quick races (docs/protocol.md §11.11, docs/rules.md §4 "Quick races"): the player asks to be
// matched under a rule set, waits (the waiting view, views/queue.js) and, once matched, takes
// the seat kept for them in the race (races.js). It owns the wait (store.quick: {rules, rating,
// gap, startedAt (performance.now() of the ask, ms), asking}) and tells the view with
// notify("quick").
//
// The server keeps a wait only while the socket that asked is open: leaving the page ends it,
// and after a reconnection the page asks again. While waiting, the page asks again every
// REASK_MS (the server keeps the place) to show the rating gap accepted now, which widens with
// the wait. Leaving the waiting view for any other cancels the wait.
import { t } from "./i18n.js";
import { joinRace } from "./races.js";
import { show } from "./router.js";
import { request } from "./session.js";
import { notify, store } from "./store.js";
import { announce, errorText, homeError } from "./views/notices.js";
import { rankedNoteRead } from "./views/ranked-note.js";

/** How often (ms) a waiting page asks again, for the gap accepted now. */
export const REASK_MS = 5000;

let timer = null;

/** Ask for a quick race under `rules` ("E" or "C") and show the waiting view. */
export async function askQuickRace(rules) {
  homeError("");
  await rankedNoteRead(); // a racer's game is ranked: the note on ranked play is read first
  stopWaiting();
  store.quick = { rules, rating: null, gap: null, startedAt: performance.now(), asking: false };
  show("queue");
  notify("quick");
  await ask();
}

/** Send queue_join for the wait under way; a refusal ends it, said on the menu. */
async function ask() {
  const waiting = store.quick;
  if (!waiting || waiting.asking) return;
  clearTimeout(timer);
  waiting.asking = true;
  const reply = await request({ type: "queue_join", rules: waiting.rules });
  waiting.asking = false;
  if (store.quick !== waiting) return; // cancelled or matched meanwhile
  if (reply.type === "queue_waiting") {
    waiting.rating = reply.rating;
    waiting.gap = reply.gap;
    notify("quick");
    timer = setTimeout(ask, REASK_MS);
    return;
  }
  stopWaiting();
  show("home");
  homeError(errorText(reply));
}

/** Forget the wait here (the server is told separately, or knows already). */
function stopWaiting() {
  clearTimeout(timer);
  store.quick = null;
}

/** Stop waiting: the server is told (queue_cancel); `home`: the menu is shown. */
export function cancelQuickRace({ home = true } = {}) {
  if (!store.quick) return;
  stopWaiting();
  request({ type: "queue_cancel" });
  if (home) show("home");
}

/** After a reconnection: the server dropped the wait with the old socket, so ask again. */
export function reaskQuickRace() {
  if (store.quick) ask();
}

/** A pushed message about quick races; false when it is not one. */
export function quickPush(msg) {
  if (msg.type !== "queue_matched") return false;
  // Matched while waiting here: into the race. (Another tab of mine that is not waiting, or
  // a wait cancelled as the match was made, leaves the seat untaken.)
  if (store.quick && store.quick.rules === msg.rules) {
    stopWaiting();
    announce(t("quick.matched"));
    joinRace(msg.invite);
  }
  return true;
}
