// Signing up and signing in (the register view): the name form, which answers with the player's
// recovery code (shown in the recovery panel); the form that signs this device in with a name
// and recovery code; the note naming the race the player came for (from a race's link) or
// saying this device was signed out; and the top bar's "signed in as" line.
import { api } from "../api.js";
import { $ } from "../dom.js";
import { t } from "../i18n.js";
import { signIn, store } from "../store.js";
import { errorText } from "./notices.js";
import { showRecovery } from "./recovery.js";

/** @param {() => void} signedIn  called once the server has registered or signed in the player */
export function initRegister(signedIn) {
  $("#register-form").addEventListener("submit", (ev) => register(ev, signedIn));
  $("#signin-form").addEventListener("submit", (ev) => signInWithCode(ev, signedIn));
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
    showSignedOutNote(false);
    showRecovery(me.recovery_code, me.name);
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

async function signInWithCode(ev, signedIn) {
  ev.preventDefault();
  const name = $("#signin-name");
  const code = $("#signin-code");
  const button = $("#signin-submit");
  const error = $("#signin-error");
  error.textContent = "";
  button.disabled = true;
  try {
    const me = await api.signIn(name.value, code.value);
    signIn(me.token, { id: me.id, name: me.name });
    code.value = "";
    $("#signin").open = false;
    showSignedOutNote(false);
    signedIn();
  } catch (err) {
    error.textContent = errorText(err.code);
    code.focus();
  } finally {
    button.disabled = false;
  }
}

/** Open the sign-in form (from the settings: this device signs in as another player). */
export function openSignIn() {
  const form = $("#signin");
  form.open = true;
  form.scrollIntoView({ block: "nearest" });
  $("#signin-name").focus();
}

/** Say (or stop saying) above the forms that this device was signed out. */
export function showSignedOutNote(visible) {
  $("#register-signed-out").hidden = !visible;
}

export function renderWho() {
  const who = store.player ? t("player.signedIn", { name: store.player.name }) : "";
  // The top bar's line is hidden on a phone: the menu says it there.
  $("#who").textContent = who;
  $("#home-who").textContent = who;
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
