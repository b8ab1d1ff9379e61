// The race panel: lobby (invite, players, start), countdown on server time, live progress bars
// of every racer, and the results; and the invite page a player sees before joining. It only
// shows the ROOM object and race_progress pushes.
import { codeLine, codeText } from "./code.js";
import { formatTime, locale, t, tn, tNodes } from "./i18n.js";
import { clear, h } from "./dom.js";
import { POSITIONS } from "./rules.js";

/** Server time now, from the offset measured with the ROOM object's `server_time`. */
export function serverNow(race) {
  return Date.now() + (race ? race.offset : 0);
}

/** Remember how far the server's clock is from ours (clock skew; latency is small). */
export function measureOffset(race, room) {
  if (room && room.server_time) race.offset = Date.parse(room.server_time) - Date.now();
}

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
function nameLine(p, me) {
  const tags = [];
  if (p.host) tags.push(h("span", { class: "tag" }, t("race.host")));
  if (me && p.player_id === me.id) tags.push(h("span", { class: "tag" }, t("race.you")));
  return h("span", { class: "name-line" }, h("span", { class: "name" }, p.name), ...tags);
}

/** A racer's or watcher's presence state ("connected", "reconnecting", "gone"), or null. */
function presenceState(p) {
  const state = p && p.presence ? p.presence.state : null;
  return state === "connected" || state === "reconnecting" || state === "gone" ? state : null;
}

/** The data attributes of a racer's or watcher's row: their id, and their presence if known. */
function rowData(p) {
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
function offsetOf(room) {
  if (!roomOffsets.has(room)) roomOffsets.set(room, room.server_time ? Date.parse(room.server_time) - Date.now() : 0);
  return roomOffsets.get(room);
}

/**
 * How a racer or watcher is there, beside their name: nothing when connected (their row's dot
 * says it) or unknown; "reconnecting — 42 s left" (counting down to the end of the grace
 * period, on server time) while their place is kept; "gone since 12:03" once gone.
 */
function presenceMark(p, offset) {
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
function watcherList(room, me, offset, { id, heading }) {
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

function rulesLimit(room) {
  return t("race.rulesLimit", { rules: t(`rules.short.${room.rules}`), minutes: Math.round(room.time_limit_s / 60) });
}

/**
 * The invite page: a race as anyone with its invite sees it, before joining or watching.
 * @param {HTMLElement} root  #view-invite
 * @param {object} state  {invite, room (ROOM or null while loading), error, joinError, busy}
 * @param {object} me  the player
 * @param {object} on  {join(), watch(), home(), errorText(code)}
 */
export function renderInvite(root, state, me, on) {
  const room = state.room;
  root.querySelector("#invite-title").textContent = t("invite.title", {
    invite: room ? room.invite : state.invite.toUpperCase(),
  });
  const el = clear(root.querySelector("#invite-room"));
  const home = h("button", { type: "button", id: "invite-home", onclick: () => on.home() }, t("end.menu"));
  if (!room) {
    if (state.error) {
      el.append(h("p", { class: "error", role: "alert", id: "invite-error" }, on.errorText(state.error)));
      el.append(h("div", { class: "race-actions" }, home));
    } else {
      el.append(h("p", { class: "muted", id: "invite-loading" }, t("invite.loading")));
    }
    return;
  }
  // A gone racer's seat in a full lobby goes to a newcomer (docs/rules.md §4 "Presence").
  const full = room.players.filter((p) => presenceState(p) !== "gone").length >= room.max_players;
  const offset = offsetOf(room);
  const host = room.players.find((p) => p.host);
  let status = t(`invite.status.${room.status}`);
  if (room.status === "lobby" && full) status = t("invite.status.full");
  el.append(
    h("p", { class: "invite-status", id: "invite-status" }, status),
    dealMark(room, "invite-deal"),
    h("p", { class: "muted", id: "invite-rules" }, rulesLimit(room)),
  );
  if (host) el.append(h("p", { id: "invite-host" }, t("invite.host", { name: host.name })));
  if (room.players.length) {
    const list = h("ul", { class: "racers", id: "invite-players" });
    for (const p of room.players) {
      list.append(h("li", { class: "racer", dataset: rowData(p) }, nameLine(p, me), presenceMark(p, offset)));
    }
    el.append(h("h2", {}, t("race.players", { n: room.players.length, max: room.max_players })), list);
  }
  if (room.status === "lobby" || room.status === "running") {
    el.append(...watcherList(room, me, offset, { id: "invite-watchers", heading: "h2" }));
  }
  if (state.joinError) el.append(h("p", { class: "error", role: "alert", id: "invite-error" }, on.errorText(state.joinError)));
  const actions = h("div", { class: "race-actions" });
  const busy = !!state.busy;
  if (room.status === "lobby" && !full) {
    actions.append(
      h(
        "button",
        { type: "button", class: "primary", id: "invite-join", disabled: busy, onclick: () => on.join() },
        state.busy === "join" ? t("race.joining", { invite: room.invite }) : t("invite.join"),
      ),
    );
  }
  if (room.status === "lobby" || room.status === "running") {
    actions.append(h("button", { type: "button", id: "invite-watch", disabled: busy, onclick: () => on.watch() }, t("invite.watch")));
  } else if (room.status === "finished") {
    actions.append(
      h("button", { type: "button", class: "primary", id: "invite-watch", disabled: busy, onclick: () => on.watch() }, t("invite.results")),
    );
  }
  actions.append(home);
  el.append(actions);
}

export class RacePanel {
  /**
   * @param {HTMLElement} el  the #race-panel element
   * @param {object} on  {start(), leave(), home(), replay(code), newRace()}
   */
  constructor(el, on) {
    this.el = el;
    this.on = on;
    this.race = null;
    this.me = null;
    this.game = null;
    this.ticker = setInterval(() => this._tick(), 200);
  }

  /** Show a race: {invite, room, role, offset, progress}; `me` the player; `game` my STATE. */
  render(race, me, game) {
    this.race = race;
    this.me = me;
    this.game = game;
    const active = document.activeElement;
    const focusId = active && this.el.contains(active) ? active.id : null;
    clear(this.el);
    if (!race) return;
    const room = race.room;
    if (room.status === "lobby") this._lobby(room);
    else if (room.status === "running") this._running(room);
    else if (room.status === "finished") this._finished(room);
    else this._closed();
    if (focusId) {
      const again = this.el.querySelector(`#${CSS.escape(focusId)}`);
      if (again) again.focus();
    }
    this._tick();
  }

  _isHost(room) {
    return this.me && room.host_id === this.me.id;
  }

  _lobby(room) {
    const link = `${location.origin}${room.link}`;
    const copy = h(
      "button",
      {
        type: "button",
        id: "race-copy",
        onclick: async () => {
          const input = this.el.querySelector("#race-link");
          try {
            await navigator.clipboard.writeText(link);
          } catch (err) {
            input.select();
            document.execCommand("copy");
          }
          copy.textContent = t("race.copied");
        },
      },
      t("race.copy"),
    );
    this.el.append(
      h("h2", {}, t("race.lobby")),
      h("p", { class: "muted" }, t("race.inviteIs")),
      h("p", { class: "invite-code", id: "race-invite-code" }, room.invite),
      h("label", { for: "race-link", class: "muted" }, t("race.link")),
      h("div", { class: "share" }, h("input", { id: "race-link", readonly: true, value: link }), copy),
      h("p", { class: "muted" }, rulesLimit(room)),
      dealMark(room, "race-deal"),
      h("h3", {}, t("race.players", { n: room.players.length, max: room.max_players })),
      this._racers(room, false),
      ...this._watchers(room),
    );
    const actions = h("div", { class: "race-actions" });
    if (this.race.role === "racer" && this._isHost(room)) {
      // Gone racers are dealt out at the start (docs/rules.md §4 "Presence"): the host is told.
      const someGone = room.players.some((p) => presenceState(p) === "gone");
      if (someGone) this.el.append(h("p", { class: "start-note", id: "race-start-note" }, t("race.goneLeftOut")));
      actions.append(
        h(
          "button",
          {
            type: "button",
            class: "primary",
            id: "race-start",
            "aria-describedby": someGone ? "race-start-note" : null,
            onclick: () => this.on.start(),
          },
          t("race.start"),
        ),
      );
    } else {
      if (this.race.role !== "racer") this.el.append(h("p", { class: "muted" }, t("race.spectating")));
      this.el.append(h("p", { id: "race-wait" }, t("race.waitHost")));
    }
    actions.append(h("button", { type: "button", id: "race-leave", onclick: () => this.on.leave() }, t("race.leave")));
    this.el.append(actions);
  }

  _running(room) {
    this.el.append(h("h2", {}, t("race.progress")), dealMark(room, "race-deal"));
    if (this.race.role !== "racer") this.el.append(h("p", { class: "muted" }, t("race.spectating")));
    this.el.append(
      h(
        "div",
        { class: "countdown", id: "race-countdown", "aria-live": "polite" },
        h("span", { class: "countdown-label" }),
        h("span", { class: "countdown-number" }),
      ),
      h("p", { class: "muted", id: "race-time-left" }),
      this._racers(room, true),
      ...this._watchers(room),
    );
    const actions = h("div", { class: "race-actions" });
    const mine = this.game && this.game.mode === "race" && this.game.status === "playing";
    const label = this.race.role === "racer" && mine ? t("race.leaveRunning") : t("race.leave");
    actions.append(h("button", { type: "button", id: "race-leave", onclick: () => this.on.leave() }, label));
    this.el.append(actions);
  }

  _finished(room) {
    this.el.append(h("h2", { id: "race-results-title" }, t("race.results")));
    const rows = (room.results || []).map((r) => {
      // Winners rank by finish time, the others by score then cards left (docs/rules.md §4).
      const detail = r.status === "won" ? formatTime(r.elapsed_ms) : t("race.cardsLeft", { n: r.cards_left });
      return h(
        "tr",
        { class: this.me && r.player_id === this.me.id ? "me" : null },
        h("td", {}, String(r.rank)),
        h("td", {}, r.name),
        h(
          "td",
          {},
          // "playing" in the results: the game was stopped by the time limit.
          h("span", { class: "result-status" }, t(r.status === "playing" ? "race.status.timeUp" : `race.status.${r.status}`)),
          h("small", {}, detail),
        ),
        h("td", {}, String(r.score)),
      );
    });
    this.el.append(
      h(
        "table",
        { class: "grid-table", id: "race-results" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, t("race.rank")),
            h("th", { scope: "col" }, t("race.player")),
            h("th", { scope: "col" }, t("race.result")),
            h("th", { scope: "col" }, t("stat.score")),
          ),
        ),
        h("tbody", {}, rows),
      ),
    );
    this.el.append(dealMark(room, "race-deal"));
    const actions = h("div", { class: "race-actions" });
    if (room.code) {
      const code = codeText(room.code, { id: "race-code-shown" });
      this.el.append(
        codeLine(tNodes("race.dealWas", { code }), room.code, code, { textId: "race-deal-was", copyId: "race-copy-code", cls: "muted" }),
      );
      actions.append(h("button", { type: "button", onclick: () => this.on.replay(room.code) }, t("end.replay")));
    }
    actions.append(
      h("button", { type: "button", onclick: () => this.on.newRace() }, t("race.newRace")),
      h("button", { type: "button", onclick: () => this.on.home() }, t("end.menu")),
    );
    this.el.append(actions);
  }

  _closed() {
    this.el.append(
      h("p", { id: "race-closed" }, t("race.closed")),
      h("button", { type: "button", onclick: () => this.on.home() }, t("end.menu")),
    );
  }

  /**
   * Every racer with their presence, and in a running race a progress bar (cards removed from
   * the layout), cards left and score.
   */
  _racers(room, withProgress) {
    const list = h("ul", { class: "racers", id: "race-players" });
    for (const p of room.players) {
      const mine = this.me && p.player_id === this.me.id;
      const mark = presenceMark(p, this.race.offset);
      const parts = [nameLine(p, this.me)];
      if (withProgress) {
        const prog = this._progress(p, mine);
        const cards = prog ? prog.cards_left : POSITIONS;
        const score = prog ? prog.score : 500;
        const status = prog ? prog.status : "playing";
        let detail = t("race.progressRow", { cards: tn("count.cardsLeft", cards), score });
        if (status && status !== "playing") detail += ` · ${t(`race.status.${status}`)}`;
        parts.push(
          h("span", { class: "detail" }, detail),
          mark,
          h("progress", { max: String(POSITIONS), value: String(POSITIONS - cards), "aria-label": `${p.name}: ${detail}` }),
        );
      } else {
        parts.push(mark);
      }
      list.append(h("li", { class: mine ? "racer me" : "racer", dataset: rowData(p) }, parts));
    }
    return list;
  }

  /** The room's watchers, under its racers (nothing when nobody watches). */
  _watchers(room) {
    return watcherList(room, this.me, this.race.offset, { id: "race-watchers", heading: "h3" });
  }

  /** The freshest progress known for a racer: my own STATE, a race_progress push, or the room. */
  _progress(player, mine) {
    if (mine && this.game && this.game.mode === "race") return this.game;
    const pushed = this.race.progress[player.player_id];
    const fromRoom = player.progress;
    if (pushed && (!fromRoom || pushed.moves >= fromRoom.moves)) return pushed;
    return fromRoom;
  }

  _tick() {
    const race = this.race;
    if (!race || race.room.status !== "running") return;
    const now = serverNow(race);
    const countdown = this.el.querySelector("#race-countdown");
    const startsAt = race.room.starts_at ? Date.parse(race.room.starts_at) : null;
    if (countdown) {
      let label = "";
      let text = "";
      if (startsAt && now < startsAt) {
        label = t("race.startsIn");
        text = String(Math.ceil((startsAt - now) / 1000));
      } else if (race.role === "racer" && !this.game) {
        text = t("race.getReady");
      } else if (startsAt && now - startsAt < 1500) {
        text = t("race.go");
      }
      const labelEl = countdown.querySelector(".countdown-label");
      const numberEl = countdown.querySelector(".countdown-number");
      if (labelEl.textContent !== label) labelEl.textContent = label;
      if (numberEl.textContent !== text) numberEl.textContent = text;
      countdown.hidden = !text;
    }
    const left = this.el.querySelector("#race-time-left");
    if (left && race.room.ends_at && startsAt && now >= startsAt) {
      const text = t("race.timeLeft", { time: formatTime(Date.parse(race.room.ends_at) - now) });
      if (left.textContent !== text) left.textContent = text;
    }
  }
}
