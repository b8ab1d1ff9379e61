// The race room beside the table: the lobby (invite, link, players, the players I follow who
// are online with an Invite button, start), the countdown on server time, every racer's live
// progress, and the results. It only shows the ROOM object, race_progress pushes
// (store.race) and the players I follow (store.following), and reports the player's choices.
// While the player plays a race, a phone folds the panel to one line (my place, the leader)
// that opens on a tap, so that the table fills the screen (app.css); it unfolds when the
// player's game or the race ends.
import { codeLine, codeText } from "../code.js";
import { $, clear, h } from "../dom.js";
import { formatTime, t, tn, tNodes } from "../i18n.js";
import { serverNow } from "../race-clock.js";
import { POSITIONS } from "../rules.js";
import { store } from "../store.js";
import { errorText } from "./notices.js";
import { changeMark } from "./rating.js";
import { dealMark, nameLine, presenceMark, presenceState, rowData, rulesLimit, watcherList } from "./racers.js";

let panel = null;

/**
 * Build the panel in #race-panel.
 * @param {object} on  {start(), leave(), home(), replay(code), watchReplay(gameId), newRace(),
 *   invite(playerId) → Promise of null or the error reply}
 */
export function initRacePanel(on) {
  panel = new RacePanel($("#race-panel"), on);
}

/** Show the race followed (store.race), or hide the panel when there is none. */
export function renderRace() {
  const race = store.race;
  $("#race-panel").hidden = !race;
  $(".play-body").classList.toggle("with-race", !!race);
  $("#view-play").classList.toggle("racing", !!race);
  panel.render(race, store.player, store.game);
}

/** A refused race request (e.g. starting it), under the panel. */
export function raceError(text) {
  $("#race-panel").append(h("p", { class: "error", role: "alert" }, text));
}

class RacePanel {
  /**
   * @param {HTMLElement} el  the #race-panel element
   * @param {object} on  {start(), leave(), home(), replay(code), watchReplay(gameId), newRace(),
   *   invite(playerId)}
   */
  constructor(el, on) {
    this.el = el;
    this.on = on;
    this.invited = {}; // "invite:player id" → "sent", or the error reply that refused it
    this.race = null;
    this.me = null;
    this.game = null;
    this.unfolded = null; // the invite of the race whose folded panel the player opened
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
    this.el.classList.remove("foldable", "folded");
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
    if (this.race.role === "racer") this.el.append(...this._friendsOnline(room));
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

  /** The players I follow who are online and not seated here, each with an Invite button. */
  _friendsOnline(room) {
    const seated = new Set(room.players.map((p) => p.player_id));
    const following = store.following ? [...store.following.values()] : [];
    const online = following.filter((p) => p.online && !seated.has(p.id));
    const title = h("h3", { id: "race-friends-title" }, t("friends.onlineTitle"));
    if (!online.length) {
      // Those online may all be seated here already: then nobody is missing, say so.
      const here = following.some((p) => p.online && seated.has(p.id));
      return [title, h("p", { class: "muted", id: "race-friends-none" }, t(here ? "friends.allHere" : "friends.noneOnline"))];
    }
    const list = h("ul", { class: "friends-online", id: "race-friends", "aria-labelledby": "race-friends-title" });
    for (const p of online) {
      const key = `${room.invite}:${p.id}`;
      const done = this.invited[key];
      const button = h(
        "button",
        {
          type: "button",
          class: "invite-btn",
          disabled: done === "sent",
          "aria-label": t("friends.inviteName", { name: p.name }),
          onclick: async () => {
            button.disabled = true;
            const refused = await this.on.invite(p.id);
            this.invited[key] = refused || "sent";
            this.render(this.race, this.me, this.game);
          },
        },
        done === "sent" ? t("friends.inviteSent") : t("friends.invite"),
      );
      const row = [h("span", { class: "name" }, p.name), button];
      if (done && done !== "sent") row.push(h("small", { class: "error" }, errorText(done)));
      list.append(h("li", { dataset: { player: String(p.id) } }, row));
    }
    return [title, list];
  }

  /**
   * While I play the race: a button of one line, my place and the leader, that folds the panel
   * on a phone (app.css shows it there only) and opens it again on a tap.
   */
  _fold(room) {
    const unfolded = this.unfolded === this.race.invite;
    this.el.classList.add("foldable");
    this.el.classList.toggle("folded", !unfolded);
    const racers = room.players.map((p) => {
      const prog = this._progress(p, this.me && p.player_id === this.me.id);
      const cards = prog ? prog.cards_left : POSITIONS;
      return { p, cards, score: prog ? prog.score : 500, won: !!prog && prog.status === "won", ms: prog && prog.elapsed_ms };
    });
    // The results order as it stands (docs/rules.md §4 "Results order"): who cleared the peaks,
    // quickest first, then the most cards removed, then the highest score (not among racers who
    // removed nothing: they are equal); equals share a place.
    const ahead = (a, b) =>
      a.won !== b.won
        ? a.won
        : a.won
          ? a.ms < b.ms
          : a.cards !== b.cards
            ? a.cards < b.cards
            : a.cards < POSITIONS && a.score > b.score;
    const mine = racers.find((r) => this.me && r.p.player_id === this.me.id);
    const place = 1 + racers.filter((r) => ahead(r, mine)).length;
    const leader = racers.find((r) => !racers.some((o) => ahead(o, r)));
    const text =
      place === 1
        ? t("race.foldLeading", { n: racers.length })
        : t("race.foldBehind", { place, n: racers.length, leader: leader.p.name });
    return h(
      "button",
      {
        type: "button",
        id: "race-fold",
        class: "race-fold",
        "aria-expanded": String(unfolded),
        title: t(unfolded ? "race.fold" : "race.unfold"),
        onclick: () => {
          this.unfolded = unfolded ? null : this.race.invite;
          this.render(this.race, this.me, this.game);
        },
      },
      h("span", { class: "race-fold-text" }, text),
      h("span", { class: "race-fold-mark", "aria-hidden": "true" }, unfolded ? "▴" : "▾"),
    );
  }

  _running(room) {
    const playing = this.race.role === "racer" && this.game && this.game.mode === "race" && this.game.status === "playing";
    if (playing && this.me && room.players.some((p) => p.player_id === this.me.id)) this.el.append(this._fold(room));
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

  /** A link to a racer's replay ("/replay/<game id>"), opened in the page. */
  _replayLink(result) {
    const open = (ev) => {
      ev.preventDefault();
      this.on.watchReplay(result.game_id);
    };
    return h(
      "a",
      {
        href: `/replay/${result.game_id}`,
        class: "replay-link",
        onclick: open,
        "aria-label": t("replay.watchOf", { name: result.name }),
        title: t("replay.watchOf", { name: result.name }),
      },
      // The panel is narrow: a mark shows instead (app.css: ▶); the label names the link.
      h("span", { class: "btn-text" }, t("replay.watch")),
    );
  }

  _finished(room) {
    this.el.append(h("h2", { id: "race-results-title" }, t("race.results")));
    if (room.rated) this.el.append(h("p", { class: "muted", id: "race-rated" }, t("race.rated")));
    const rows = (room.results || []).map((r) => {
      // Winners rank by finish time, the others by cards removed, then score, then who got
      // there first (docs/rules.md §4 "Results order"). The server ranks: equal results share a
      // rank (1, 1, 3), shown as it comes.
      const detail = r.status === "won" ? formatTime(r.elapsed_ms) : t("race.cardsRemoved", { n: r.cards_removed });
      return h(
        "tr",
        { class: this.me && r.player_id === this.me.id ? "me" : null, dataset: { rank: String(r.rank) } },
        h("td", {}, String(r.rank)),
        h("td", { class: "name" }, r.name),
        h(
          "td",
          {},
          // "playing" in the results: the game was stopped by the time limit.
          h("span", { class: "result-status" }, t(r.status === "playing" ? "race.status.timeUp" : `race.status.${r.status}`)),
          h("small", {}, detail),
        ),
        // A rated race: each racer's rating change under the score (docs/rules.md §4 "Ratings").
        h("td", { class: "score-cell" }, String(r.score), r.rating ? changeMark(r.rating) : null),
        // Every racer's game is public once the results exist (docs/rules.md §4 "Replays").
        h("td", { class: "replay-cell" }, r.game_id ? this._replayLink(r) : null),
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
            h("th", { scope: "col", class: "name" }, t("race.player")),
            h("th", { scope: "col" }, t("race.result")),
            h("th", { scope: "col" }, t("stat.score")),
            h("th", { scope: "col" }, h("span", { class: "sr-only" }, t("replay.column"))),
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
