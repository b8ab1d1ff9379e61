// The Following page ("/following"): the players I follow, online or not, and their result on
// today's daily (from today's friends' board, docs/protocol.md §12.15), each name a link to the
// profile and each row with Unfollow. It draws what the store and the server say; following
// and unfollowing are handed back.
import { api } from "../api.js";
import { $, clear, h } from "../dom.js";
import { t } from "../i18n.js";
import { failedNotice } from "./notices.js";

export class FollowingView {
  /**
   * @param {HTMLElement} root  #view-following
   * @param {object} ctx  {token() → string|null, today() → date|null, following() → Map|null,
   *   unfollow(id) (→ Promise of null or an error code), openProfile(playerId), errorText(code)}
   */
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.results = null; // player id → today's board entry
    this.error = null; // {code}: why today's results could not be read
    this.status = null; // an error code from an unfollow
    this.loading = 0;
  }

  /** Read today's results of the players I follow, and draw. */
  async open() {
    const ticket = ++this.loading;
    this.results = null;
    this.error = null;
    this.status = null;
    this.render();
    const token = this.ctx.token();
    try {
      const today = this.ctx.today() || (await api.daily()).date;
      const board = await api.friendsBoard(today, token);
      if (ticket !== this.loading) return;
      this.results = new Map(board.entries.map((e) => [e.player_id, e]));
    } catch (err) {
      if (ticket !== this.loading) return;
      this.error = { code: err.code || "network" };
    }
    this.render();
  }

  render() {
    const body = clear($("#following-body", this.root));
    const following = this.ctx.following();
    if (this.error) {
      const text = t("following.failed", { why: this.ctx.errorText(this.error.code) });
      body.append(failedNotice("following-failed", text, () => this.open()));
    }
    if (following === null) {
      body.append(h("p", { class: "muted" }, t("lb.loading")));
      return;
    }
    if (!following.size) {
      body.append(h("p", { class: "muted", id: "following-empty" }, t("following.empty")));
      return;
    }
    if (this.status) body.append(h("p", { class: "error", role: "alert" }, this.ctx.errorText(this.status)));
    const players = [...following.values()].sort((a, b) => Number(b.online) - Number(a.online) || a.name.localeCompare(b.name));
    body.append(
      h(
        "table",
        { class: "grid-table", id: "following-table" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, t("following.state")),
            h("th", { scope: "col", class: "name" }, t("lb.name")),
            h("th", { scope: "col" }, t("following.today")),
            h("th", { scope: "col" }, h("span", { class: "sr-only" }, t("friends.unfollow"))),
          ),
        ),
        h("tbody", {}, players.map((p) => this._row(p))),
      ),
    );
  }

  _row(p) {
    const entry = this.results && this.results.get(p.id);
    const today = entry
      ? t("friends.resultToday", { rank: entry.rank, score: entry.score })
      : this.results
        ? t("friends.noResultToday")
        : "—";
    const label = t("friends.unfollowName", { name: p.name });
    return h(
      "tr",
      { dataset: { player: String(p.id) }, class: p.online ? "online" : "offline" },
      h("td", {}, h("span", { class: "presence-dot", "aria-hidden": "true" }), " ", t(p.online ? "friends.online" : "friends.offline")),
      h(
        "td",
        { class: "name" },
        h(
          "a",
          {
            href: `/players/${p.id}`,
            class: "player-link",
            onclick: (ev) => {
              ev.preventDefault();
              this.ctx.openProfile(p.id);
            },
          },
          p.name,
        ),
      ),
      h("td", { class: "today" }, today),
      h(
        "td",
        { class: "follow-cell" },
        h(
          "button",
          {
            type: "button",
            class: "follow-btn following",
            "aria-label": label,
            title: label,
            onclick: async () => {
              this.status = await this.ctx.unfollow(p.id);
              this.render();
            },
          },
          h("span", { class: "btn-text" }, t("friends.unfollow")),
        ),
      ),
    );
  }
}
