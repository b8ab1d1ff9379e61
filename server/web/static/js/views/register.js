// Signing up (the register view): the name form, the note naming the race the player came for
// (from a race's link), and the top bar's "signed in as" line.
import { api } from "../api.js";
import { $ } from "../dom.js";
import { t } from "../i18n.js";
import { signIn, store } from "../store.js";
import { errorText } from "./notices.js";

/** @param {() => void} signedIn  called once the server has registered the player */
export function initRegister(signedIn) {
  $("#register-form").addEventListener("submit", (ev) => register(ev, signedIn));
}

async function register(ev, signedIn) {
  ev.preventDefault();
  const input = $("#register-name");
  const button = $("#register-submit");
  const error = $("#register-error");
  error.textContent = "";
  button.disabled = true;
  button.textContent = t("register.busy");
  try {
    const me = await api.register(input.value);
    signIn(me.token, { id: me.id, name: me.name });
    signedIn();
  } catch (err) {
    error.textContent = errorText(err.code);
    input.focus();
  } finally {
    button.disabled = false;
    button.textContent = t("register.submit");
    renderInviteNote();
  }
}

export function renderWho() {
  $("#who").textContent = store.player ? t("player.signedIn", { name: store.player.name }) : "";
}

/** "You are invited to race …" above the form, and its button saying so. */
export function renderInviteNote() {
  const el = $("#register-invite");
  const invite = store.pendingInvite;
  el.hidden = !invite;
  el.textContent = invite ? t("register.invite", { invite: invite.toUpperCase() }) : "";
  const button = $("#register-submit");
  if (button && !button.disabled) button.textContent = invite ? t("register.submitJoin") : t("register.submit");
}
