// The settings panel (error help, show playable cards, and the account: a new recovery code,
// signing the other devices out, signing this device in with a recovery code), opened over the
// page below the top bar so the table stays where it is (Escape or Close shuts it), and the
// language menu in the top bar. A change is kept in the store, which tells whoever follows it (app.js:
// say hello again, draw the table again); a new language is set through i18n.js.
import { api } from "../api.js";
import { $ } from "../dom.js";
import { locale, setLocale, t, tn } from "../i18n.js";
import { saveLocale, setSetting, store } from "../store.js";
import { errorText } from "./notices.js";
import { showRecovery } from "./recovery.js";

let showSettings = null;

/** Open or close the panel as the address says ("/settings"), leaving the address as it is. */
export function settingsFromAddress(open) {
  showSettings(open);
}

/**
 * @param {object} on  {openSignIn(): show the form that signs this device in with a recovery
 *   code; unauthorized(): this device's token no longer works; address(open): the panel
 *   opened or closed (its address, "/settings")}
 */
export function initSettings(on) {
  const panel = $("#settings");
  const toggle = $("#nav-settings");
  const errorHelp = $("#set-error-help");
  const showPlayable = $("#set-show-playable");
  errorHelp.checked = store.errorHelp;
  showPlayable.checked = store.showPlayable;
  const setOpen = (open, { address = true } = {}) => {
    if (panel.hidden === !open) return;
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    if (address) on.address(open);
    if (open) errorHelp.focus();
    else accountStatus("");
  };
  showSettings = (open) => setOpen(open, { address: false });
  toggle.addEventListener("click", () => setOpen(panel.hidden));
  $("#settings-close").addEventListener("click", () => {
    setOpen(false);
    toggle.focus();
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape" || panel.hidden || ev.defaultPrevented) return;
    ev.preventDefault();
    setOpen(false);
    toggle.focus();
  });
  errorHelp.addEventListener("change", () => setSetting("errorHelp", errorHelp.checked));
  showPlayable.addEventListener("change", () => setSetting("showPlayable", showPlayable.checked));
  const lang = $("#lang-select");
  lang.value = locale();
  lang.addEventListener("change", () => {
    saveLocale(lang.value);
    setLocale(lang.value);
  });
  $("#btn-new-recovery").addEventListener("click", () => account(newRecoveryCode, on));
  $("#btn-sign-out-others").addEventListener("click", () => account(signOutOthers, on));
  $("#btn-account-sign-in").addEventListener("click", () => {
    setOpen(false);
    on.openSignIn();
  });
  renderAccount();
}

/** Run an account request with its buttons disabled meanwhile; a refused token signs out. */
async function account(action, on) {
  const buttons = [$("#btn-new-recovery"), $("#btn-sign-out-others")];
  accountStatus("");
  buttons.forEach((b) => (b.disabled = true));
  try {
    await action();
  } catch (err) {
    if (err.code === "unauthorized") on.unauthorized();
    else accountStatus(errorText(err.code));
  } finally {
    buttons.forEach((b) => (b.disabled = false));
  }
}

async function newRecoveryCode() {
  const { recovery_code: code } = await api.newRecoveryCode(store.token);
  showRecovery(code, store.player ? store.player.name : "");
  accountStatus(t("account.newCodeMade"));
}

async function signOutOthers() {
  const { signed_out: count } = await api.signOutOthers(store.token);
  accountStatus(count ? tn("account.signedOut", count) : t("account.noOthers"));
}

function accountStatus(text) {
  $("#account-status").textContent = text;
}

/** The account's part of the settings: only for a player signed in on this device. */
export function renderAccount() {
  $("#account").hidden = !store.token;
}

/** The language menu shows the language in use. */
export function showLanguage() {
  $("#lang-select").value = locale();
}
