// The settings panel (error help, show playable cards) and the language menu in the top bar.
// A change is kept in the store, which tells whoever follows it (app.js: say hello again,
// draw the table again); a new language is set through i18n.js.
import { $ } from "../dom.js";
import { locale, setLocale } from "../i18n.js";
import { saveLocale, setSetting, store } from "../store.js";

export function initSettings() {
  const panel = $("#settings");
  const toggle = $("#nav-settings");
  const errorHelp = $("#set-error-help");
  const showPlayable = $("#set-show-playable");
  errorHelp.checked = store.errorHelp;
  showPlayable.checked = store.showPlayable;
  const setOpen = (open) => {
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    if (open) errorHelp.focus();
  };
  toggle.addEventListener("click", () => setOpen(panel.hidden));
  $("#settings-close").addEventListener("click", () => {
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
}

/** The language menu shows the language in use. */
export function showLanguage() {
  $("#lang-select").value = locale();
}
