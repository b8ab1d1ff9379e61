// The one table every board is drawn with (the daily leaderboard, the weekly and monthly boards,
// the ladder): one row per entry in the order given, my row highlighted ("me", aria-current),
// each row naming its player (data-player); the columns are the caller's, after the rank and
// name every board opens with (rankColumns). Also what a failed read of a board means.
import { h } from "../dom.js";
import { t } from "../i18n.js";

/**
 * A board's table.
 * @param {object} opts
 * @param {string} opts.id  the table's id
 * @param {object[]} opts.entries  the rows, each with `player_id`
 * @param {{id: number}|null} opts.me  the player shown as "me", if any
 * @param {Array<{head: string|Node, headClass?: string, cellClass?: string,
 *   cell: (entry: object, mine: boolean) => (string|Node|null)}>} opts.columns  each column's
 *   header (a text, or a node such as a screen-reader-only label), its classes ("name", "opt":
 *   hidden on a phone, …) and what a row shows in it
 * @returns {HTMLTableElement}
 */
export function boardTable({ id, entries, me, columns }) {
  return h(
    "table",
    { class: "grid-table", id },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.headClass || null }, c.head)))),
    h(
      "tbody",
      {},
      entries.map((e) => {
        const mine = !!me && e.player_id === me.id;
        return h(
          "tr",
          { class: mine ? "me" : null, "aria-current": mine ? "true" : null, dataset: { player: String(e.player_id) } },
          columns.map((c) => h("td", { class: c.cellClass || null }, c.cell(e, mine))),
        );
      }),
    ),
  );
}

/** A header read only by a screen reader (the column of a row's buttons or links). */
export function hiddenHead(text) {
  return h("span", { class: "sr-only" }, text);
}

/**
 * An entry's name, a link to the player's profile ("/players/<id>") opened in the page with
 * `openProfile(playerId)`; my own is marked "(you)".
 */
export function nameLink(entry, mine, openProfile) {
  return h(
    "a",
    {
      href: `/players/${entry.player_id}`,
      class: "player-link",
      onclick: (ev) => {
        ev.preventDefault();
        openProfile(entry.player_id);
      },
    },
    mine ? t("lb.you", { name: entry.name }) : entry.name,
  );
}

/**
 * The columns every board opens with: the rank, and the player's name linking to their profile
 * (`openProfile(playerId)`).
 */
export function rankColumns(openProfile) {
  return [
    { head: t("lb.rank"), cell: (e) => String(e.rank) },
    { head: t("lb.name"), headClass: "name", cellClass: "name", cell: (e, mine) => nameLink(e, mine, openProfile) },
  ];
}

/**
 * A board's table (see boardTable) opening with rankColumns, then `columns`; "me" and the
 * profile links are `ctx`'s ({me() → {id}|null, openProfile(playerId)}).
 */
export function rankedTable(id, entries, ctx, columns) {
  return boardTable({ id, entries, me: ctx.me(), columns: [...rankColumns(ctx.openProfile), ...columns] });
}

/**
 * A read of a board that failed for want of the server (unreachable, or a 5xx answer such as
 * 503 unavailable) as {code}: the page says so and offers to try again. Null for an answer about
 * the board itself (not_ranked, no_daily): that is what the board is.
 */
export function serverFailure(err) {
  if (!err || !(err.status === 0 || err.status >= 500)) return null;
  return { code: err.code || "network" };
}
