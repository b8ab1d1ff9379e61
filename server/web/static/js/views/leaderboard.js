// The daily leaderboard (REST): a date's ranking page by page, my row highlighted, the window
// "around me", and the friends' view (me and the players I follow, with their ranks on the
// whole board); each name links to the player's profile, each row has a follow / unfollow
// button and, once the date is over, a link to its replay; a form follows a player by name.
import { api } from "../api.js";
import { codeLine, codeText } from "../code.js";
import { $, clear, h } from "../dom.js";
import { formatTime, t, tn, tNodes } from "../i18n.js";
import { hiddenHead, rankedTable, serverFailure } from "./board-table.js";
import { levelBadge, parAndBaselines } from "./difficulty.js";
import { PeriodBoard } from "./period-board.js";
import { failedNotice } from "./notices.js";

export function shiftDate(iso, days) {
  const d = new Date(`${iso}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

export class Leaderboard {
  /**
   * @param {HTMLElement} root  #view-leaderboard
   * @param {object} ctx  {me() → {id, name}|null, token() → string|null, following() →
   *   Map|null, follow(id), unfollow(id) (each → Promise of null or an error code),
   *   followName(name) (→ Promise of {name} or {code}), replay(code), watchReplay(gameId),
   *   errorText(code), openProfile(playerId), dated(date): the board of `date` is shown (its
   *   address)}
   */
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.today = null;
    this.date = null;
    this.scope = "everyone"; // or "friends"
    this.followStatus = null; // {key, name} or {code}: the last follow by name
    this._clear();
    this.loading = 0;
    this.dateInput = $("#lb-date", root);
    $("#lb-prev", root).addEventListener("click", () => this.open(shiftDate(this.date, -1)));
    $("#lb-next", root).addEventListener("click", () => this.open(shiftDate(this.date, 1)));
    $("#lb-today", root).addEventListener("click", () => this.open(null));
    this.dateInput.addEventListener("change", () => {
      if (this.dateInput.value) this.open(this.dateInput.value);
    });
    $("#lb-more", root).addEventListener("click", () => this._more());
    $("#lb-everyone", root).addEventListener("click", () => this._setScope("everyone"));
    $("#lb-friends", root).addEventListener("click", () => this._setScope("friends"));
    $("#lb-follow-form", root).addEventListener("submit", (event) => {
      event.preventDefault();
      this._followName();
    });
    this.periods = new PeriodBoard(root, ctx, () => ({ date: this.date, today: this.today }));
  }

  _setScope(scope) {
    if (scope === this.scope) return;
    this.scope = scope;
    this.open(this.date);
  }

  async _followName() {
    const input = $("#lb-follow-name", this.root);
    const name = input.value.trim();
    if (!name) return;
    const done = await this.ctx.followName(name);
    this.followStatus = done.code ? { code: done.code } : { key: "friends.nowFollowing", name: done.name };
    if (!done.code) {
      input.value = "";
      if (this.scope === "friends") this.open(this.date);
    }
    this.render();
  }

  /**
   * Forget the board shown: its entries, cursor, facts, window around me and errors. The errors
   * are kept as codes and text keys, never as texts: render() translates them, so they follow
   * a change of language (the page calls render() again then).
   */
  _clear() {
    this.entries = [];
    this.cursor = null;
    this.info = null;
    this.aroundEntries = null;
    this.aroundError = null; // a text key, e.g. "lb.notRanked"
    this.error = null; // {code}: why the date's facts could not be read, e.g. "no_daily"
    this.friendsEntries = null; // the friends' view, when it is the one shown
    this.friendsError = null; // {code}: why it could not be read
    this.pageError = null; // {code}: why the board's page (the first or a further one) could not be read
  }

  /** Show a date's board (today's, from the server's clock, when none is given). */
  async open(date) {
    const ticket = ++this.loading;
    if (!this.today || !date) {
      try {
        const today = await api.daily();
        this.today = today.date;
      } catch (err) {
        this.today = this.today || new Date().toISOString().slice(0, 10);
      }
      // Another date was asked for meanwhile (the date field, a link): that one is shown.
      if (ticket !== this.loading) return;
    }
    this.date = date && date <= this.today ? date : this.today;
    // Under a week's or month's board (its own address), the daily board is not the one shown.
    if (!this.periods.kind) this.ctx.dated(this.date);
    this._clear();
    this.render();
    const me = this.ctx.me();
    const token = this.ctx.token();
    const friends = this.scope === "friends" && me && token;
    const [info, page, around] = await Promise.allSettled([
      api.daily(this.date),
      friends ? api.friendsBoard(this.date, token) : api.leaderboard(this.date, { limit: 50 }),
      me && !friends ? api.around(this.date, me.id, 3) : Promise.reject(new Error("not shown")),
    ]);
    if (ticket !== this.loading) return;
    if (friends) {
      if (info.status === "fulfilled") this.info = info.value;
      else this.error = { code: info.reason && info.reason.code };
      if (page.status === "fulfilled") this.friendsEntries = page.value.entries;
      else this.friendsError = { code: page.reason && page.reason.code };
      this.render();
      return;
    }
    if (info.status === "fulfilled") this.info = info.value;
    else this.error = { code: info.reason && info.reason.code };
    if (page.status === "fulfilled") {
      this.entries = page.value.entries;
      this.cursor = page.value.next_cursor;
    } else this.pageError = serverFailure(page.reason);
    if (around.status === "fulfilled") this.aroundEntries = around.value.entries;
    else this.aroundError = (me && serverFailure(around.reason)) || "lb.notRanked";
    this.render();
  }

  /** Show a date's board (today's when none is given) under the Day tab: its address was opened. */
  openDay(date) {
    this.shownTicket = (this.shownTicket || 0) + 1;
    this.periods.kind = null;
    return this.open(date);
  }

  /**
   * Show a week's or month's board (`kind` "week" or "month", `period` "2026-W49" or "2026-12"):
   * its address was opened. Today is read first (a period after it shows today's); the daily
   * board under the Day tab is today's when none was shown yet.
   */
  async openPeriod(kind, period) {
    const ticket = (this.shownTicket = (this.shownTicket || 0) + 1);
    this.periods.awaitPeriod(kind);
    if (!this.today) {
      try {
        this.today = (await api.daily()).date;
      } catch (err) {
        this.today = new Date().toISOString().slice(0, 10);
      }
      if (ticket !== this.shownTicket) return;
    }
    this.periods.showPeriod(kind, period);
    if (!this.date) this.open(this.today);
  }

  async _more() {
    if (!this.cursor) return;
    const date = this.date;
    this.pageError = null;
    try {
      const page = await api.leaderboard(date, { limit: 50, cursor: this.cursor });
      if (date !== this.date) return;
      this.entries = this.entries.concat(page.entries);
      this.cursor = page.next_cursor;
    } catch (err) {
      if (date !== this.date) return;
      this.pageError = { code: err.code, more: true };
    }
    this.render();
  }



  render() {
    const root = this.root;
    this.dateInput.value = this.date || "";
    if (this.today) this.dateInput.max = this.today;
    // Until the board knows its date (today's, asked of the server) there is no day before.
    $("#lb-prev", root).disabled = !this.date;
    $("#lb-next", root).disabled = !this.date || this.date >= this.today;
    const info = $("#lb-info", root);
    const code = clear($("#lb-code", root));
    const figures = $("#lb-par", root);
    figures.textContent = "";
    if (this.error) {
      const failed = this.error.code;
      info.textContent = failed === "no_daily" ? t("lb.noDaily") : t("lb.infoFailed");
    } else if (this.info) {
      info.textContent = t("lb.info", {
        players: tn("count.players", this.info.players),
        ranked: this.info.ranked,
        rules: t(`rules.short.${this.info.rules}`),
      });
      const level = levelBadge(this.info, "lb-level");
      if (level) info.append(" · ", level);
      figures.textContent = parAndBaselines(this.info);
      if (this.info.code) {
        const shown = codeText(this.info.code, { id: "lb-code-shown" });
        code.append(
          codeLine(tNodes("lb.codeWas", { code: shown }), this.info.code, shown, { textId: "lb-code-was", copyId: "lb-copy-code" }),
          h("button", { type: "button", id: "lb-replay", onclick: () => this.ctx.replay(this.info.code) }, t("lb.replay")),
        );
      }
    } else info.textContent = t("lb.loading");
    const signedIn = !!(this.ctx.me() && this.ctx.token());
    const friends = this.scope === "friends" && signedIn;
    $(".lb-scope", root).hidden = !signedIn;
    $("#lb-everyone", root).setAttribute("aria-pressed", String(!friends));
    $("#lb-friends", root).setAttribute("aria-pressed", String(friends));
    $("#lb-follow-form", root).hidden = !signedIn;
    const status = $("#lb-follow-status", root);
    const said = this.followStatus;
    status.textContent = !said ? "" : said.code ? this.ctx.errorText(said.code) : t(said.key, { name: said.name });
    $(".lb-around", root).hidden = friends;
    const around = clear($("#lb-around", root));
    const again = () => this.open(this.date);
    if (this.aroundEntries) around.append(this._table(this.aroundEntries, "lb-around-table"));
    else if (typeof this.aroundError === "string") around.append(h("p", { class: "muted" }, t(this.aroundError)));
    else if (this.aroundError) around.append(failedNotice("lb-around-failed", t("lb.aroundFailed", { why: this.ctx.errorText(this.aroundError.code) }), again));
    const list = clear($("#lb-list", root));
    const pageFailed = this.pageError && !this.pageError.more;
    if (this.error && this.error.code !== "no_daily") {
      list.append(failedNotice("lb-failed", t("lb.failed", { why: this.ctx.errorText(this.error.code) }), again));
    } else if (friends) {
      if (this.friendsEntries && this.friendsEntries.length) list.append(this._table(this.friendsEntries, "lb-friends-table"));
      else if (this.friendsEntries) list.append(h("p", { class: "muted", id: "lb-friends-empty" }, t("friends.boardEmpty")));
      else if (this.friendsError) list.append(failedNotice("lb-failed", t("lb.failed", { why: this.ctx.errorText(this.friendsError.code) }), again));
    } else if (pageFailed) {
      list.append(failedNotice("lb-failed", t("lb.failed", { why: this.ctx.errorText(this.pageError.code) }), again));
    } else if (this.entries.length) list.append(this._table(this.entries, "lb-table"));
    else if (this.info) list.append(h("p", { class: "muted", id: "lb-empty" }, t("lb.empty")));
    if (this.pageError && this.pageError.more) {
      list.append(failedNotice("lb-more-failed", t("lb.moreFailed", { why: this.ctx.errorText(this.pageError.code) }), () => this._more()));
    }
    $("#lb-more", root).hidden = friends || !this.cursor || pageFailed || !!(this.pageError && this.pageError.more);
    this.periods.render();
  }

  /** A row's follow / unfollow button (none on my own row, nor when signed out). */
  _followButton(entry, mine) {
    if (mine || !this.ctx.token()) return null;
    const following = this.ctx.following();
    const followed = !!(following && following.has(entry.player_id));
    const label = followed ? t("friends.unfollowName", { name: entry.name }) : t("friends.followName", { name: entry.name });
    return h(
      "button",
      {
        type: "button",
        class: followed ? "follow-btn following" : "follow-btn",
        "aria-pressed": String(followed),
        "aria-label": label,
        title: label,
        onclick: async () => {
          const failed = await (followed ? this.ctx.unfollow(entry.player_id) : this.ctx.follow(entry.player_id));
          this.followStatus = failed ? { code: failed } : null;
          if (!failed && this.scope === "friends") this.open(this.date);
          this.render();
        },
      },
      // A phone shows a mark instead (app.css: + or ✓); the label names the action.
      h("span", { class: "btn-text" }, followed ? t("friends.unfollow") : t("friends.follow")),
    );
  }

  /** A link to an entry's replay ("/replay/<game id>"), opened in the page. */
  _replayLink(entry) {
    const open = (ev) => {
      ev.preventDefault();
      this.ctx.watchReplay(entry.game_id);
    };
    return h(
      "a",
      {
        href: `/replay/${entry.game_id}`,
        class: "replay-link",
        onclick: open,
        "aria-label": t("replay.watchOf", { name: entry.name }),
        title: t("replay.watchOf", { name: entry.name }),
      },
      // A phone shows a mark instead (app.css: ▶); the label names the link.
      h("span", { class: "btn-text" }, t("replay.watch")),
    );
  }

  _table(entries, id) {
    return rankedTable(id, entries, this.ctx, [
      { head: t("lb.score"), cell: (e) => String(e.score) },
      { head: t("lb.moves"), headClass: "opt", cellClass: "opt", cell: (e) => String(e.moves) },
      { head: t("lb.time"), cell: (e) => formatTime(e.elapsed_ms) },
      { head: t("lb.status"), headClass: "opt", cellClass: "opt", cell: (e) => t(`lb.status.${e.status}`) },
      { head: hiddenHead(t("friends.follow")), cellClass: "follow-cell", cell: (e, mine) => this._followButton(e, mine) },
      { head: hiddenHead(t("replay.column")), cellClass: "replay-cell", cell: (e) => (e.replayable ? this._replayLink(e) : null) },
    ]);
  }
}
