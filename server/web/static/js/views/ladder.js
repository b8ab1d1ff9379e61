// The ladder (REST `/api/v1/ladder/{rules}`, docs/protocol.md §12): every rated player of a rule
// set by rating, tabs Easy / Classic, page by page with Next and Previous (the server's
// cursors, the ones already followed kept for Previous), my row highlighted, the window "around
// me" and the friends' view (me and the players I follow, at their places on the whole
// ladder). Each name links to the player's profile. A failed read says so and offers to try
// again; it never shows as an empty ladder.
import { api } from "../api.js";
import { $, clear, h } from "../dom.js";
import { t } from "../i18n.js";
import { rankedTable, serverFailure } from "./board-table.js";
import { failedNotice } from "./notices.js";
import { ratingText } from "./rating.js";

/** Entries on one page of the ladder. */
export const LADDER_PAGE = 50;
/** Entries either side of mine in the window around me. */
const RADIUS = 3;

export class LadderView {
  /**
   * @param {HTMLElement} root  #view-ladder
   * @param {object} ctx  {me() → {id, name}|null, token() → string|null, errorText(code),
   *   openProfile(playerId), addressed(rules): the ladder of `rules` is shown (its address)}
   */
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.rules = "E";
    this.scope = "everyone"; // or "friends"
    this.loading = 0;
    this._clear();
    for (const rules of ["E", "C"]) {
      $(`#ladder-tab-${rules}`, root).addEventListener("click", () => {
        if (rules === this.rules) return;
        this.ctx.addressed(rules);
        this.open(rules);
      });
    }
    $("#ladder-prev", root).addEventListener("click", () => this._page(-1));
    $("#ladder-next", root).addEventListener("click", () => this._page(1));
    $("#ladder-everyone", root).addEventListener("click", () => this._setScope("everyone"));
    $("#ladder-friends", root).addEventListener("click", () => this._setScope("friends"));
  }

  _clear() {
    this.cursors = [null]; // the cursor of each page followed so far (the first has none)
    this.entries = null; // the page (or the friends' view) shown; null until read
    this.next = null; // the next page's cursor
    this.failed = null; // {code}: why the page could not be read
    this._clearAround();
  }

  _clearAround() {
    this.around = null; // the entries around mine
    this.aroundFailed = null; // {code}: the window could not be read
    this.unrated = false; // I am not on this ladder
  }

  /** Show a rule set's ladder ("E" or "C") from its first page. */
  open(rules) {
    this.rules = rules === "C" ? "C" : "E";
    this._clear();
    this._read({ around: true });
  }

  _friends() {
    return this.scope === "friends" && !!(this.ctx.me() && this.ctx.token());
  }

  _setScope(scope) {
    if (scope === this.scope) return;
    this.scope = scope;
    this._clear();
    this._read({ around: true });
  }

  _page(step) {
    if (step > 0 && this.next) this.cursors.push(this.next);
    else if (step < 0 && this.cursors.length > 1) this.cursors.pop();
    else return;
    this._read({ around: false });
  }

  /** Read the page shown (the cursor last followed, or the friends' view) and, with `around`, my window. */
  async _read({ around }) {
    const ticket = ++this.loading;
    const rules = this.rules;
    const me = this.ctx.me();
    const friends = this._friends();
    this.entries = null;
    this.failed = null;
    if (around) this._clearAround();
    this.render();
    const cursor = this.cursors[this.cursors.length - 1];
    const [page, near] = await Promise.allSettled([
      friends ? api.ladderFriends(rules, this.ctx.token()) : api.ladder(rules, { limit: LADDER_PAGE, cursor }),
      around && me && !friends ? api.ladderAround(rules, me.id, RADIUS) : Promise.reject(new Error("not read")),
    ]);
    if (ticket !== this.loading) return;
    if (page.status === "fulfilled") {
      this.entries = page.value.entries || [];
      this.next = friends ? null : page.value.next_cursor || null;
    } else this.failed = { code: (page.reason && page.reason.code) || "network" };
    if (around && me && !friends) {
      if (near.status === "fulfilled") this.around = near.value.entries || [];
      else {
        this.aroundFailed = serverFailure(near.reason);
        this.unrated = !this.aroundFailed;
      }
    }
    this.render();
  }

  render() {
    const root = this.root;
    for (const rules of ["E", "C"]) $(`#ladder-tab-${rules}`, root).setAttribute("aria-pressed", String(rules === this.rules));
    const signedIn = !!(this.ctx.me() && this.ctx.token());
    const friends = this._friends();
    $(".ladder-scope", root).hidden = !signedIn;
    $("#ladder-everyone", root).setAttribute("aria-pressed", String(!friends));
    $("#ladder-friends", root).setAttribute("aria-pressed", String(friends));

    $(".ladder-around", root).hidden = friends || !this.ctx.me();
    const around = clear($("#ladder-around", root));
    if (this.around && this.around.length) around.append(this._table(this.around, "ladder-around-table"));
    else if (this.around || this.unrated) around.append(h("p", { class: "muted", id: "ladder-unrated" }, t("ladder.unrated")));
    else if (this.aroundFailed) {
      const text = t("ladder.aroundFailed", { why: this.ctx.errorText(this.aroundFailed.code) });
      around.append(failedNotice("ladder-around-failed", text, () => this._read({ around: true })));
    }

    const list = clear($("#ladder-list", root));
    if (this.failed) {
      const text = t("ladder.failed", { why: this.ctx.errorText(this.failed.code) });
      list.append(failedNotice("ladder-failed", text, () => this._read({ around: !!this.aroundFailed })));
    } else if (!this.entries) list.append(h("p", { class: "muted" }, t("lb.loading")));
    else if (this.entries.length) list.append(this._table(this.entries, friends ? "ladder-friends-table" : "ladder-table"));
    else list.append(h("p", { class: "muted", id: "ladder-empty" }, t(friends ? "ladder.friendsEmpty" : "ladder.empty")));

    const paging = $(".ladder-pages", root);
    const first = this.cursors.length === 1;
    paging.hidden = friends || (first && !this.next);
    $("#ladder-prev", root).disabled = first;
    $("#ladder-next", root).disabled = !this.next;
    $("#ladder-page", root).textContent = t("ladder.page", { n: this.cursors.length });
  }

  _table(entries, id) {
    return rankedTable(id, entries, this.ctx, [
      { head: t("ladder.rating"), cellClass: "rating-cell", cell: (e) => ratingText(e.rating, e.provisional) },
      { head: t("ladder.races"), cell: (e) => String(e.races) },
      { head: t("ladder.wins"), cell: (e) => String(e.wins) },
    ]);
  }
}
