// A race's invite page (its link, or an invite typed on the menu): the room as the REST API
// shows it — host, players, rules, time limit, and whether the host chose the deal — before
// the player decides to join or watch; a player already seated in the room goes straight in.
// It owns the page's room (store.invite: {invite, room, error, joinError, busy}), follows it
// every few seconds until the player chooses, and draws it with views/invite.js.
import { api } from "./api.js";
import { $ } from "./dom.js";
import { goHome } from "./games.js";
import { joinRace } from "./races.js";
import { correctAddress, goTo, show } from "./router.js";
import { dropGame, leaveRaceContext, setInvite, setPendingInvite, store, subscribe } from "./store.js";
import { renderInvite } from "./views/invite.js";
import { errorText } from "./views/notices.js";

/** Follow the invite page's room while it is shown, and show a refused join on it. */
export function initInvitePage() {
  // The invite page follows the room (players arriving, the start) until the player chooses.
  setInterval(() => {
    const state = store.invite;
    if (store.view === "invite" && state && state.room && !state.busy && ["lobby", "running"].includes(state.room.status)) {
      refreshInvite();
    }
  }, 3000);
  subscribe("invite-refused", (reply) => {
    store.invite.busy = null;
    store.invite.joinError = reply;
    renderInvitePage();
  });
}

/** Show the invite page of `invite` (its address too). */
export async function openInvite(invite) {
  const clean = String(invite).trim();
  setPendingInvite(null);
  if (!clean) return;
  goTo(`/race/${encodeURIComponent(clean)}`);
  dropGame();
  leaveRaceContext();
  show("invite");
  setInvite({ invite: clean, room: null, error: null, joinError: null, busy: null });
  renderInvitePage();
  await refreshInvite({ first: true });
}

async function refreshInvite({ first = false } = {}) {
  const state = store.invite;
  if (!state || store.view !== "invite") return;
  try {
    const room = await api.race(state.invite);
    if (store.invite !== state) return;
    state.room = room;
    state.error = null;
    if (first && isMember(room)) {
      state.busy = "join";
      renderInvitePage();
      joinRace(room.invite);
      return;
    }
    correctAddress(room.link);
  } catch (err) {
    if (store.invite !== state) return;
    if (first || err.code !== "network") state.error = err.code;
  }
  renderInvitePage();
}

function isMember(room) {
  const me = store.player;
  if (!me) return false;
  return (room.players || []).some((p) => p.player_id === me.id) || (room.results || []).some((r) => r.player_id === me.id);
}

/** Draw the invite page's room (nothing when no invite page is open). */
export function renderInvitePage() {
  const state = store.invite;
  if (!state) return;
  const choose = (busy, watch) => {
    state.busy = busy;
    state.joinError = null;
    renderInvitePage();
    joinRace(state.room ? state.room.invite : state.invite, { watch });
  };
  renderInvite($("#view-invite"), state, store.player, {
    join: () => choose("join", false),
    watch: () => choose("watch", true),
    home: goHome,
    errorText,
  });
}
