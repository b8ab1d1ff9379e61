// The weekly and monthly boards (REST, docs/protocol.md §12.17) beside the daily one: tabs Day /
// Week / Month over the leaderboard view; a period's board page by page, my row highlighted, the
// window "around me" and the friends' view, with the period before and after. The period shown
// is the one holding the daily board's date, or the one the address names
// ("/boards/week/2026-W49", "/boards/month/2026-12", router.js): each tab and period has its own
// address, so Back and Forward move between them. A failed read says so and offers to try again.
import { api } from "../api.js";
import { $, clear, h } from "../dom.js";
import { formatTime, t } from "../i18n.js";
import { rankedTable } from "./board-table.js";

/** The ISO week ("2026-W49") holding a UTC date ("YYYY-MM-DD"). */
export function isoWeek(iso) {
  const d = new Date(`${iso}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 4 - (d.getUTCDay() || 7)); // the week's Thursday
  const year = d.getUTCFullYear();
  const week = Math.floor((d - Date.UTC(year, 0, 1)) / 86400000 / 7) + 1;
  return `${year}-W${String(week).padStart(2, "0")}`;
}

/** The period of a kind ("week" or "month") holding a UTC date. */
export function periodOf(kind, iso) {
  return kind === "week" ? isoWeek(iso) : iso.slice(0, 7);
}

/**
 * The first day ("YYYY-MM-DD", UTC) of a week ("2026-W49": its Monday, ISO 8601) or a month
 * ("2026-12"), or null when `period` names no such week or month (week 53 of a year of 52, month 13).
 */
export function periodStart(kind, period) {
  if (kind === "week") {
    const m = /^(\d{4})-W(\d{2})$/.exec(period);
    if (!m) return null;
    const jan4 = new Date(Date.UTC(Number(m[1]), 0, 4)); // always in week 1
    jan4.setUTCDate(jan4.getUTCDate() - ((jan4.getUTCDay() + 6) % 7) + 7 * (Number(m[2]) - 1));
    const monday = jan4.toISOString().slice(0, 10);
    return isoWeek(monday) === period ? monday : null;
  }
  const m = /^(\d{4})-(\d{2})$/.exec(period);
  return m && Number(m[2]) >= 1 && Number(m[2]) <= 12 ? `${period}-01` : null;
}

/** A UTC date ("YYYY-MM-DD") moved by whole periods (weeks, or months from its first day). */
function shiftPeriod(kind, iso, n) {
  const d = new Date(`${iso}T00:00:00Z`);
  if (kind === "week") d.setUTCDate(d.getUTCDate() + 7 * n);
  else d.setUTCMonth(d.getUTCMonth() + n, 1);
  return d.toISOString().slice(0, 10);
}

export class PeriodBoard {
  /**
   * @param {HTMLElement} root  #view-leaderboard (its tabs and #lb-period)
   * @param {object} ctx  {me(), token(), errorText(code), openProfile(playerId), dated(date): the
   *   daily board of `date` is shown (its address), periodShown(kind, period, {replace}): a
   *   week's or month's board is shown (its address; `replace`: in place of the one in the
   *   address, no new history entry)}
   * @param {() => {date: string|null, today: string|null}} dates  the daily board's date and today
   */
  constructor(root, ctx, dates) {
    this.root = root;
    this.ctx = ctx;
    this.dates = dates;
    this.kind = null; // null: the daily board is shown
    this.anchor = null; // a date of the period shown
    this.scope = "everyone"; // or "friends"
    this.loading = 0;
    this._clear();
    for (const kind of ["day", "week", "month"]) {
      $(`#lb-tab-${kind}`, root).addEventListener("click", () => this.show(kind === "day" ? null : kind));
    }
    $("#lbp-prev", root).addEventListener("click", () => this._move(-1));
    $("#lbp-next", root).addEventListener("click", () => this._move(1));
    $("#lbp-more", root).addEventListener("click", () => this._more());
    $("#lbp-everyone", root).addEventListener("click", () => this._setScope("everyone"));
    $("#lbp-friends", root).addEventListener("click", () => this._setScope("friends"));
  }

  _clear() {
    this.board = null; // the page's answer (period, dates, entries), or the friends' view
    this.entries = [];
    this.cursor = null;
    this.around = null;
    this.failed = null; // {code}: why the board could not be read
  }

  /**
   * Show a kind of period's board ("week", "month": the period holding the daily board's date),
   * or the daily board (null), at its address: a tab was chosen.
   */
  show(kind) {
    if (kind === this.kind) return;
    this.kind = kind;
    const { date, today } = this.dates();
    if (kind) {
      this.anchor = date || today || new Date().toISOString().slice(0, 10);
      this.ctx.periodShown(kind, periodOf(kind, this.anchor));
      this.open();
    } else {
      this.ctx.dated(date || today);
      this.render();
    }
  }

  /** A kind of period's board ("week", "month") is to be shown, its period not known yet. */
  awaitPeriod(kind) {
    this.kind = kind;
    this.anchor = null;
    this._clear();
    this.render();
  }

  /**
   * Show the board of the week or month the address names (`kind` "week" or "month", `period`
   * "2026-W49" or "2026-12"). A period that does not exist, or is after today's, shows today's,
   * its address put right in place.
   */
  showPeriod(kind, period) {
    this.kind = kind;
    const { today } = this.dates();
    const current = today ? periodOf(kind, today) : null;
    const start = periodStart(kind, period);
    if (!start || (current && period > current)) {
      this.anchor = today || new Date().toISOString().slice(0, 10);
      this.ctx.periodShown(kind, periodOf(kind, this.anchor), { replace: true });
    } else this.anchor = start;
    this.open();
  }

  _move(n) {
    this.anchor = shiftPeriod(this.kind, this.anchor, n);
    this.ctx.periodShown(this.kind, periodOf(this.kind, this.anchor));
    this.open();
  }

  _setScope(scope) {
    if (scope === this.scope) return;
    this.scope = scope;
    this.open();
  }

  _friends() {
    return this.scope === "friends" && !!(this.ctx.me() && this.ctx.token());
  }

  /** Read the period's board (its first page, or the friends' view) and my window in it. */
  async open() {
    const ticket = ++this.loading;
    const kind = this.kind;
    const period = periodOf(kind, this.anchor);
    this._clear();
    this.render();
    const me = this.ctx.me();
    const friends = this._friends();
    const [page, around] = await Promise.allSettled([
      friends ? api.periodFriends(kind, period, this.ctx.token()) : api.periodBoard(kind, period, { limit: 50 }),
      me && !friends ? api.periodAround(kind, period, me.id, 3) : Promise.reject(new Error("not shown")),
    ]);
    if (ticket !== this.loading) return;
    if (page.status === "fulfilled") {
      this.board = page.value;
      this.entries = page.value.entries;
      this.cursor = page.value.next_cursor || null;
    } else this.failed = { code: page.reason && page.reason.code };
    if (around.status === "fulfilled") this.around = around.value.entries;
    this.render();
  }

  async _more() {
    if (!this.cursor) return;
    const kind = this.kind;
    try {
      const page = await api.periodBoard(kind, this.board.period, { limit: 50, cursor: this.cursor });
      if (kind !== this.kind) return;
      this.entries = this.entries.concat(page.entries);
      this.cursor = page.next_cursor || null;
    } catch (err) {
      this.failed = { code: err.code };
    }
    this.render();
  }

  render() {
    const root = this.root;
    root.classList.toggle("showing-period", !!this.kind);
    for (const kind of ["day", "week", "month"]) {
      $(`#lb-tab-${kind}`, root).setAttribute("aria-pressed", String((this.kind || "day") === kind));
    }
    const section = $("#lb-period", root);
    section.hidden = !this.kind;
    if (!this.kind) return;
    const week = this.kind === "week";
    // No anchor yet: the address's period waits for today to be known (Leaderboard.openPeriod).
    const period = this.anchor ? periodOf(this.kind, this.anchor) : "…";
    $("#lbp-prev", root).setAttribute("aria-label", t(week ? "boards.prevWeek" : "boards.prevMonth"));
    $("#lbp-next", root).setAttribute("aria-label", t(week ? "boards.nextWeek" : "boards.nextMonth"));
    const { today } = this.dates();
    $("#lbp-prev", root).disabled = !this.anchor;
    $("#lbp-next", root).disabled = !today || !this.anchor || period >= periodOf(this.kind, today);
    const board = this.board;
    $("#lbp-title", root).textContent =
      board && board.starts_on
        ? t(week ? "boards.weekTitle" : "boards.monthTitle", { period, from: board.starts_on, to: board.ends_on })
        : t(week ? "boards.weekTitle" : "boards.monthTitle", { period, from: "…", to: "…" });
    const signedIn = !!(this.ctx.me() && this.ctx.token());
    const friends = this._friends();
    $(".lbp-scope", root).hidden = !signedIn;
    $("#lbp-everyone", root).setAttribute("aria-pressed", String(!friends));
    $("#lbp-friends", root).setAttribute("aria-pressed", String(friends));
    const aroundBox = clear($("#lbp-around", root));
    $(".lbp-around", root).hidden = friends || !this.ctx.me();
    if (this.around) aroundBox.append(this._table(this.around, "lbp-around-table"));
    else if (board) aroundBox.append(h("p", { class: "muted" }, t("boards.notRanked")));
    const list = clear($("#lbp-list", root));
    if (this.failed) {
      list.append(
        h("p", { class: "error", id: "lbp-failed", role: "alert" }, t("boards.failed", { error: this.ctx.errorText(this.failed.code) })),
        h("button", { type: "button", id: "lbp-retry", onclick: () => this.open() }, t("boards.retry")),
      );
    } else if (!board) list.append(h("p", { class: "muted" }, t("lb.loading")));
    else if (this.entries.length) list.append(this._table(this.entries, "lbp-table"));
    else list.append(h("p", { class: "muted", id: "lbp-empty" }, t("boards.empty")));
    $("#lbp-more", root).hidden = friends || !this.cursor;
  }

  _table(entries, id) {
    return rankedTable(id, entries, this.ctx, [
      { head: t("boards.total"), cell: (e) => String(e.total) },
      { head: t("boards.days"), cell: (e) => String(e.days) },
      { head: t("boards.time"), headClass: "opt", cellClass: "opt", cell: (e) => formatTime(e.elapsed_ms) },
    ]);
  }
}
