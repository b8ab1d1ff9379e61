// A player's public profile (GET /api/v1/players/{id}, docs/protocol.md §12.14): name, member
// since, the current and best daily streak, a calendar of the recent months coloured by the
// daily's result on each UTC date (rank, score and share of par on hover, on focus and in each
// date's accessible name), the other figures, every result in a table, and the ratings per
// rule set (GET /api/v1/players/{id}/ratings: the rating, rated races played and won, a chart of
// the rating over them, the last ones with their change). It draws what the server sends;
// opening another player's profile, a date's board, a ladder or a race is handed back.
import { api } from "../api.js";
import { clear, h } from "../dom.js";
import { locale, t, tn } from "../i18n.js";
import { failedNotice } from "./notices.js";
import { changeMark, ratingText } from "./rating.js";
import { ratingChart } from "./ratings-chart.js";

/** How many of the last rated races each rule set lists. */
export const RATED_SHOWN = 10;

/** How many months the calendar shows: the current one and those before it. */
export const MONTHS_SHOWN = 3;

const STATUSES = ["won", "blocked", "resigned", "playing"];

function utc(iso) {
  return new Date(`${iso}T00:00:00Z`);
}

function isoOf(date) {
  return date.toISOString().slice(0, 10);
}

function percent(share) {
  return new Intl.NumberFormat(locale(), { style: "percent", maximumFractionDigits: 1 }).format(share);
}

/** What a date's result says in words: "Won · rank 1 · score 754 · 99.6% of par". */
export function dayText(day) {
  const parts = [t(`profile.status.${day.status}`)];
  if (day.rank !== null) parts.push(t("profile.rank", { rank: day.rank }));
  parts.push(t("profile.score", { score: day.score }));
  if (day.par_share !== null) parts.push(t("profile.share", { share: percent(day.par_share) }));
  return parts.join(" · ");
}

export class ProfileView {
  /**
   * @param {HTMLElement} root  #view-profile
   * @param {object} ctx  {me() → {id, name}|null, token() → string|null, following() →
   *   Map|null, follow(id), unfollow(id) (each → Promise of null or an error code),
   *   errorText(code), openLadder(rules), openRace(invite)}
   */
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.playerId = null;
    this.profile = null;
    this.error = null; // a code: why the profile could not be read, e.g. "unknown_player"
    this.loading = 0;
    this.detailDate = null;
    this.followError = null; // an error code from Follow / Unfollow
    this.ratings = null; // the player's ratings per rule set (REST), once read
    this.ratingsError = null; // a code: why they could not be read
  }

  /** Show a player's profile (asked of the server). */
  async open(playerId) {
    const ticket = ++this.loading;
    this.playerId = String(playerId);
    this.profile = null;
    this.error = null;
    this.followError = null;
    this.detailDate = null;
    this.ratings = null;
    this.ratingsError = null;
    this.render();
    const [profile, ratings] = await Promise.allSettled([api.player(this.playerId), api.ratings(this.playerId)]);
    if (ticket !== this.loading) return;
    if (profile.status === "fulfilled") this.profile = profile.value;
    else this.error = (profile.reason && profile.reason.code) || "network";
    if (ratings.status === "fulfilled") this.ratings = ratings.value.ratings || [];
    else this.ratingsError = (ratings.reason && ratings.reason.code) || "network";
    this.render();
  }

  /** Read the ratings again (after a failed read). */
  async _readRatings() {
    const ticket = this.loading;
    this.ratingsError = null;
    this.render();
    try {
      const ratings = await api.ratings(this.playerId);
      if (ticket !== this.loading) return;
      this.ratings = ratings.ratings || [];
    } catch (err) {
      if (ticket !== this.loading) return;
      this.ratingsError = err.code || "network";
    }
    this.render();
  }

  render() {
    const root = this.root;
    const title = root.querySelector("#profile-title");
    const body = clear(root.querySelector("#profile-body"));
    const p = this.profile;
    if (!p) {
      title.textContent = t("profile.heading");
      if (this.error) {
        const text = this.error === "unknown_player" ? t("profile.unknown") : this.ctx.errorText(this.error);
        body.append(h("p", { class: "error", role: "alert", id: "profile-error" }, text));
      } else body.append(h("p", { class: "muted" }, t("profile.loading")));
      return;
    }
    const me = this.ctx.me();
    title.textContent = me && me.id === p.id ? t("lb.you", { name: p.name }) : p.name;
    body.append(
      h("p", { class: "muted", id: "profile-since" }, t("profile.since", { date: p.member_since })),
      this._follow(p),
      h(
        "div",
        { class: "profile-streaks" },
        this._figure("profile-streak-current", t("profile.streak.current"), tn("profile.days", p.streak.current), "big"),
        this._figure("profile-streak-best", t("profile.streak.best"), tn("profile.days", p.streak.best), "big"),
      ),
      h(
        "dl",
        { class: "profile-figures", id: "profile-figures" },
        this._figure("profile-best-score", t("profile.bestScore"), p.best_score === null ? "—" : String(p.best_score)),
        this._figure(
          "profile-average-par",
          t("profile.averagePar"),
          p.average_par_share === null ? "—" : percent(p.average_par_share),
        ),
        this._figure("profile-ranked-days", t("profile.rankedDays"), String(p.ranked_days)),
        this._figure("profile-races", t("profile.races"), String(p.races_played)),
        this._figure("profile-races-won", t("profile.racesWon"), String(p.races_won)),
        this._standing("profile-week", "profile.week", p.week),
        this._standing("profile-month", "profile.month", p.month),
      ),
      this._ratings(),
      this._calendar(p),
      this._table(p),
    );
  }

  /** The ratings per rule set (docs/rules.md §4 "Ratings"), or why they could not be read. */
  _ratings() {
    const section = h(
      "section",
      { class: "profile-ratings", id: "profile-ratings", "aria-labelledby": "profile-ratings-title" },
      h("h2", { id: "profile-ratings-title" }, t("profile.ratings")),
    );
    if (this.ratingsError) {
      const text = t("profile.ratingsFailed", { why: this.ctx.errorText(this.ratingsError) });
      section.append(failedNotice("profile-ratings-failed", text, () => this._readRatings()));
    } else if (!this.ratings) section.append(h("p", { class: "muted" }, t("profile.loading")));
    else if (!this.ratings.length) section.append(h("p", { class: "muted", id: "profile-unrated" }, t("profile.unrated")));
    else for (const rating of this.ratings) section.append(this._rating(rating));
    return section;
  }

  /** One rule set's rating: the figures, the chart and the last rated races. */
  _rating(r) {
    const id = `profile-rating-${r.rules}`;
    const recent = r.history.slice(0, RATED_SHOWN);
    return h(
      "article",
      { class: "profile-rating", id, dataset: { rules: r.rules } },
      h("h3", {}, t(`rules.short.${r.rules}`)),
      h(
        "dl",
        { class: "profile-figures" },
        this._figure(`${id}-value`, t("ladder.rating"), ratingText(r.rating, r.provisional), "big"),
        this._figure(`${id}-races`, t("profile.ratedRaces"), String(r.races)),
        this._figure(`${id}-wins`, t("profile.ratedWins"), String(r.wins)),
      ),
      r.provisional ? h("p", { class: "muted small" }, t("profile.provisional")) : null,
      ratingChart(`${id}-chart`, r.history),
      recent.length ? this._rated(`${id}-races-table`, recent) : null,
      h(
        "p",
        {},
        h(
          "a",
          {
            href: `/ladder/${r.rules}`,
            class: "profile-link",
            id: `${id}-ladder`,
            onclick: (ev) => {
              ev.preventDefault();
              this.ctx.openLadder(r.rules);
            },
          },
          t("profile.ladder", { rules: t(`rules.short.${r.rules}`) }),
        ),
      ),
    );
  }

  /** The last rated races: when (UTC date), the place among the racers, the change. */
  _rated(id, races) {
    return h(
      "table",
      { class: "grid-table profile-rated", id },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", { scope: "col" }, t("lb.date")),
          h("th", { scope: "col" }, t("profile.place")),
          h("th", { scope: "col" }, t("profile.change")),
        ),
      ),
      h(
        "tbody",
        {},
        races.map((race) => {
          const date = race.rated_at.slice(0, 10);
          // A race is opened by its invite: its room and results.
          const when = race.invite
            ? h(
                "a",
                {
                  href: `/race/${encodeURIComponent(race.invite)}`,
                  class: "race-link",
                  onclick: (ev) => {
                    ev.preventDefault();
                    this.ctx.openRace(race.invite);
                  },
                },
                date,
              )
            : date;
          return h(
            "tr",
            { dataset: { race: String(race.race_id) } },
            h("td", {}, when),
            h("td", {}, t("profile.placeOf", { rank: race.rank, racers: race.racers })),
            h("td", {}, changeMark({ ...race, provisional: false })),
          );
        }),
      ),
    );
  }

  /** The player's rank on the board of the current week or month (§12.17), "—" without one. */
  _standing(id, key, standing) {
    if (!standing) return null;
    const value = standing.rank === null ? "—" : t("profile.periodRank", { rank: standing.rank, total: standing.total });
    return this._figure(id, t(key, { period: standing.period }), value);
  }

  /** Follow or Unfollow (signed in, on another player's profile), and why one failed. */
  _follow(p) {
    const me = this.ctx.me();
    const following = this.ctx.following();
    if (!this.ctx.token() || !me || me.id === p.id || following === null) return null;
    const followed = following.has(p.id);
    return h(
      "p",
      { class: "profile-follow" },
      h(
        "button",
        {
          type: "button",
          id: "profile-follow",
          class: followed ? "following" : "primary",
          "aria-pressed": String(followed),
          onclick: async () => {
            this.followError = await (followed ? this.ctx.unfollow(p.id) : this.ctx.follow(p.id));
            this.render();
          },
        },
        t(followed ? "friends.unfollow" : "friends.follow"),
      ),
      this.followError ? h("span", { class: "error", role: "alert" }, " ", this.ctx.errorText(this.followError)) : null,
    );
  }

  _figure(id, label, value, kind = "") {
    return h("div", { class: `profile-figure ${kind}`.trim(), id }, h("dt", {}, label), h("dd", {}, value));
  }

  _calendar(p) {
    const byDate = new Map(p.days.map((d) => [d.date, d]));
    const today = utc(p.today);
    const detail = h("p", { class: "profile-day-detail", id: "profile-day-detail", role: "status", "aria-live": "polite" });
    const show = (iso) => {
      const day = byDate.get(iso);
      this.detailDate = iso;
      detail.textContent = day ? `${iso}: ${dayText(day)}` : `${iso}: ${t("profile.status.none")}`;
    };
    const months = h("div", { class: "profile-months" });
    for (let back = MONTHS_SHOWN - 1; back >= 0; back--) {
      const first = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - back, 1));
      months.append(this._month(first, byDate, p.today, show));
    }
    const legend = h(
      "ul",
      { class: "profile-legend", "aria-label": t("profile.legend") },
      STATUSES.map((s) => h("li", {}, h("span", { class: `swatch ${s}`, "aria-hidden": "true" }), t(`profile.status.${s}`))),
    );
    if (this.detailDate) show(this.detailDate);
    return h(
      "section",
      { class: "profile-calendar", id: "profile-calendar", "aria-labelledby": "profile-calendar-title" },
      h("h2", { id: "profile-calendar-title" }, t("profile.calendar")),
      months,
      legend,
      detail,
    );
  }

  _month(first, byDate, todayIso, show) {
    const lang = locale();
    const caption = new Intl.DateTimeFormat(lang, { year: "numeric", month: "long", timeZone: "UTC" }).format(first);
    const weekday = new Intl.DateTimeFormat(lang, { weekday: "narrow", timeZone: "UTC" });
    const weekdayLong = new Intl.DateTimeFormat(lang, { weekday: "long", timeZone: "UTC" });
    // Weeks start on Monday; 2024-01-01 was a Monday.
    const head = [];
    for (let i = 0; i < 7; i++) {
      const d = new Date(Date.UTC(2024, 0, 1 + i));
      head.push(h("th", { scope: "col", abbr: weekdayLong.format(d) }, weekday.format(d)));
    }
    const rows = [];
    let row = [];
    const lead = (first.getUTCDay() + 6) % 7;
    for (let i = 0; i < lead; i++) row.push(h("td", { class: "pad" }));
    const month = first.getUTCMonth();
    for (let d = new Date(first); d.getUTCMonth() === month; d.setUTCDate(d.getUTCDate() + 1)) {
      const iso = isoOf(d);
      const day = byDate.get(iso);
      const words = day ? dayText(day) : t("profile.status.none");
      const when = iso === todayIso ? "today" : iso > todayIso ? "future" : "";
      const classes = ["day", day ? day.status : "none", when].filter(Boolean).join(" ");
      row.push(
        h(
          "td",
          {
            class: classes,
            dataset: { date: iso, status: day ? day.status : "none" },
            tabindex: day ? "0" : null,
            title: `${iso}: ${words}`,
            "aria-current": iso === todayIso ? "date" : null,
            onfocus: () => show(iso),
            onmouseenter: () => show(iso),
          },
          h("span", { "aria-hidden": "true" }, String(d.getUTCDate())),
          h("span", { class: "sr-only" }, `${iso}: ${words}`),
        ),
      );
      if (row.length === 7) {
        rows.push(h("tr", {}, row));
        row = [];
      }
    }
    if (row.length) {
      while (row.length < 7) row.push(h("td", { class: "pad" }));
      rows.push(h("tr", {}, row));
    }
    return h(
      "table",
      { class: "profile-month", dataset: { month: isoOf(first).slice(0, 7) } },
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, head)),
      h("tbody", {}, rows),
    );
  }

  _table(p) {
    const days = [...p.days].reverse();
    return h(
      "details",
      { class: "profile-all", id: "profile-all" },
      h("summary", {}, tn("profile.all", days.length)),
      days.length
        ? h(
            "table",
            { class: "grid-table", id: "profile-days" },
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                h("th", { scope: "col" }, t("lb.date")),
                h("th", { scope: "col" }, t("lb.status")),
                h("th", { scope: "col" }, t("lb.rank")),
                h("th", { scope: "col" }, t("lb.score")),
                h("th", { scope: "col" }, t("profile.parShare")),
              ),
            ),
            h(
              "tbody",
              {},
              days.map((d) =>
                h(
                  "tr",
                  { dataset: { date: d.date } },
                  h("td", {}, d.date),
                  h("td", {}, t(`profile.status.${d.status}`)),
                  h("td", {}, d.rank === null ? "—" : String(d.rank)),
                  h("td", {}, String(d.score)),
                  h("td", {}, d.par_share === null ? "—" : percent(d.par_share)),
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, t("profile.none")),
    );
  }
}
