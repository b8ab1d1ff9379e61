// The invite page: a race as anyone with its invite sees it (host, players, watchers, rules,
// time limit, whose deal), before joining or watching. It draws the room that ../invite.js
// holds, and hands the player's choice back to it.
import { clear, h } from "../dom.js";
import { t } from "../i18n.js";
import { dealMark, nameLine, offsetOf, presenceMark, presenceState, rowData, rulesLimit, watcherList } from "./racers.js";

/**
 * The invite page: a race as anyone with its invite sees it, before joining or watching.
 * @param {HTMLElement} root  #view-invite
 * @param {object} state  {invite, room (ROOM or null while loading), error (a code), joinError
 *   (an error reply), busy}
 * @param {object} me  the player
 * @param {object} on  {join(), watch(), home(), errorText(code or error reply)}
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
