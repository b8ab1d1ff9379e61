// A race's people and facts as both race views draw them (the room beside the table,
// race-panel.js, and the invite page, invite.js): a racer's name with its tags, presence marks
// (connected, reconnecting with its countdown, gone since when), the watchers, whose deal it
// is, and the rules and time limit.
import { h } from "../dom.js";
import { locale, t, tn } from "../i18n.js";

/**
 * Whose deal the race is on: the host typed its code (and may know its cards), or a random
 * sealed deal nobody knows before the race ends. Nothing when the room does not say.
 */
export function dealMark(room, id) {
  if (room.host_deal === true) {
    return h("p", { class: "deal-mark host", id, dataset: { deal: "host" } }, t("race.hostDeal"));
  }
  if (room.host_deal === false) {
    return h("p", { class: "deal-mark random", id, dataset: { deal: "random" } }, t("race.randomDeal"));
  }
  return null;
}

/** A racer's name with tags for the host and for me (`me` may be null). */
export function nameLine(p, me) {
  const tags = [];
  if (p.host) tags.push(h("span", { class: "tag" }, t("race.host")));
  if (me && p.player_id === me.id) tags.push(h("span", { class: "tag" }, t("race.you")));
  return h("span", { class: "name-line" }, h("span", { class: "name" }, p.name), ...tags);
}

/** A racer's or watcher's presence state ("connected", "reconnecting", "gone"), or null. */
export function presenceState(p) {
  const state = p && p.presence ? p.presence.state : null;
  return state === "connected" || state === "reconnecting" || state === "gone" ? state : null;
}

/** The data attributes of a racer's or watcher's row: their id, and their presence if known. */
export function rowData(p) {
  const data = { player: String(p.player_id) };
  const state = presenceState(p);
  if (state) data.presence = state;
  return data;
}

/**
 * Server times are shown on the viewer's clock (`offset`: server minus ours), e.g. "12:03" —
 * with the seconds when `seconds`.
 */
function clockTime(serverMs, offset, seconds = false) {
  const options = seconds ? { hour: "numeric", minute: "2-digit", second: "2-digit" } : { hour: "numeric", minute: "2-digit" };
  return new Intl.DateTimeFormat(locale(), options).format(new Date(serverMs - offset));
}

/** The clock offset of a room fetched on its own (the invite page), measured when first shown. */
const roomOffsets = new WeakMap();
export function offsetOf(room) {
  if (!roomOffsets.has(room)) roomOffsets.set(room, room.server_time ? Date.parse(room.server_time) - Date.now() : 0);
  return roomOffsets.get(room);
}

/**
 * How a racer or watcher is there, beside their name: nothing when connected (their row's dot
 * says it) or unknown; "reconnecting — 42 s left" (counting down to the end of the grace
 * period, on server time) while their place is kept; "gone since 12:03" once gone.
 */
export function presenceMark(p, offset) {
  const state = presenceState(p);
  if (state === "reconnecting") {
    const until = p.presence.until ? Date.parse(p.presence.until) : NaN;
    const attrs = { class: "presence reconnecting" };
    if (!Number.isNaN(until)) {
      attrs.dataset = { until: String(until), offset: String(offset) };
      attrs.title = t("presence.keptUntil", { time: clockTime(until, offset, true) });
    }
    const mark = h(
      "span",
      attrs,
      h("span", { class: "presence-icon", "aria-hidden": "true" }, "↻"),
      h("span", { class: "presence-text" }),
    );
    showCountdown(mark);
    if (mark.dataset.until) followCountdowns();
    return mark;
  }
  if (state === "gone") {
    const since = Date.parse(p.presence.since);
    const text = Number.isNaN(since) ? t("presence.gone") : t("presence.goneSince", { time: clockTime(since, offset) });
    return h(
      "span",
      { class: "presence gone" },
      h("span", { class: "presence-icon", "aria-hidden": "true" }, "⊘"),
      h("span", { class: "presence-text" }, text),
    );
  }
  return null;
}

/** A reconnecting mark's text: the seconds left of the grace period, or just "reconnecting…". */
function showCountdown(mark) {
  let text = t("presence.reconnecting");
  if (mark.dataset.until) {
    const now = Date.now() + Number(mark.dataset.offset || 0);
    const left = Math.ceil((Number(mark.dataset.until) - now) / 1000);
    if (left > 0) text = t("presence.reconnectingLeft", { n: left });
  }
  const el = mark.querySelector(".presence-text");
  if (el.textContent !== text) el.textContent = text;
}

/** Every shown countdown is refreshed while one is on the page (the panel and the invite page). */
let countdownTimer = null;
function followCountdowns() {
  if (countdownTimer) return;
  countdownTimer = setInterval(() => {
    const marks = document.querySelectorAll(".presence.reconnecting[data-until]");
    if (!marks.length) {
      clearInterval(countdownTimer);
      countdownTimer = null;
    }
    for (const mark of marks) showCountdown(mark);
  }, 250);
}

/**
 * Who watches the room, under its racers: "Watching (N)" and their names with their presence.
 * Nothing when nobody watches.
 */
export function watcherList(room, me, offset, { id, heading }) {
  const listed = room.watchers || [];
  const total = Math.max(room.watchers_total || 0, listed.length);
  if (!total) return [];
  const list = h("ul", { class: "racers watchers", id, "aria-labelledby": `${id}-title` });
  for (const w of listed) {
    const mine = me && w.player_id === me.id;
    const cls = mine ? "racer watcher me" : "racer watcher";
    list.append(h("li", { class: cls, dataset: rowData(w) }, nameLine(w, me), presenceMark(w, offset)));
  }
  const more = total - listed.length;
  const shown = [h(heading, { id: `${id}-title` }, t("race.watching", { n: total })), list];
  if (more > 0) shown.push(h("p", { class: "muted watchers-more" }, tn("count.moreWatchers", more)));
  return shown;
}

export function rulesLimit(room) {
  return t("race.rulesLimit", { rules: t(`rules.short.${room.rules}`), minutes: Math.round(room.time_limit_s / 60) });
}
