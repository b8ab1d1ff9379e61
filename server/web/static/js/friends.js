// Following (docs/rules.md §4 "Following"): the players I follow (store.following, read over
// REST and kept as I follow and unfollow), and race invitations — sending one to a followed
// player who is online from a race lobby, and the ones I get (store.invitations), joined or
// dismissed. It notifies "following" and "invitations"; the views draw them.
import { api } from "./api.js";
import { joinRace } from "./races.js";
import { request } from "./session.js";
import { notify, store } from "./store.js";

/** How long the online marks of the players I follow are taken as fresh in a lobby (ms). */
const FRESH_MS = 10_000;
let readAt = 0;
let readFor = null; // the lobby the last freshening was for
let reading = null;

function keep(player) {
  if (!store.following) store.following = new Map();
  store.following.set(player.id, player);
}

/** Read the players I follow again (with who is online now). Resolves when read. */
export function loadFollowing() {
  if (!store.token) return Promise.resolve();
  if (reading) return reading;
  reading = api
    .following(store.token)
    .then((body) => {
      store.following = new Map(body.players.map((p) => [p.id, p]));
      readAt = Date.now();
      notify("following");
    })
    .catch(() => {})
    .finally(() => {
      reading = null;
    });
  return reading;
}

/** In a race lobby (`invite`): read who is online again unless read a moment ago in it. */
export function freshenFollowing(invite) {
  if (invite === readFor && Date.now() - readAt <= FRESH_MS) return;
  readFor = invite;
  loadFollowing();
}

/** Follow a player by id; resolves with null, or the error code that refused it. */
export async function follow(playerId) {
  try {
    keep(await api.follow(store.token, playerId));
    notify("following");
    return null;
  } catch (err) {
    return err.code;
  }
}

/**
 * Follow a player by name (read as registration reads it); resolves with {name} (theirs, as
 * registered) or {code} (the error that refused it).
 */
export async function followName(name) {
  try {
    const player = await api.followName(store.token, name);
    keep(player);
    notify("following");
    return { name: player.name };
  } catch (err) {
    return { code: err.code };
  }
}

/** Stop following a player; resolves like follow(). */
export async function unfollow(playerId) {
  try {
    await api.unfollow(store.token, playerId);
    if (store.following) store.following.delete(playerId);
    notify("following");
    return null;
  } catch (err) {
    return err.code;
  }
}

/** Invite a player I follow to the race lobby I am in; resolves with null or the error reply. */
export async function inviteToRace(playerId) {
  const race = store.race;
  if (!race) return { code: "not_in_race" };
  const reply = await request({ type: "invite_to_race", invite: race.invite, player_id: playerId });
  return reply.type === "invited" ? null : reply;
}

/** A pushed message about an invitation; false when it is not one. */
export function invitationPush(msg) {
  if (msg.type !== "race_invite") return false;
  const mine = store.race && store.race.invite === msg.invite;
  if (!mine) {
    store.invitations = store.invitations.filter((i) => i.invite !== msg.invite).concat([{ invite: msg.invite, from: msg.from }]);
    notify("invitations");
  }
  return true;
}

/** Forget an invitation (dismissed, or taken up). */
export function dismissInvitation(invite) {
  store.invitations = store.invitations.filter((i) => i.invite !== invite);
  notify("invitations");
}

/** Take up an invitation: a seat in its race. */
export function acceptInvitation(invite) {
  dismissInvitation(invite);
  return joinRace(invite);
}
