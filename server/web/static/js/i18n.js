// Texts: one message catalogue per language, the JSON files the server reads its own texts from
// (server/catalogue/<locale>.json, served at /i18n/<locale>.json). Both are fetched once, when
// this module loads, so every text is at hand before the page starts; t() looks a key up in the
// current one. A text's placeholders are {name}; a counted text has one key per plural form
// (key.one, key.other: see tn()).
export const LOCALES = ["en", "zh-Hant"];

async function loadCatalogue(name) {
  const resp = await fetch(`/i18n/${name}.json`);
  if (!resp.ok) throw new Error(`the ${name} texts could not be loaded (HTTP ${resp.status})`);
  return resp.json();
}

export const TABLES = Object.fromEntries(
  await Promise.all(LOCALES.map(async (name) => [name, await loadCatalogue(name)])),
);
const en = TABLES.en;

let current = "en";
const listeners = new Set();

/** The locale to start with: the stored choice, else the browser's language. */
export function initialLocale(stored) {
  if (stored && TABLES[stored]) return stored;
  const langs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || "en"];
  for (const lang of langs) {
    const l = String(lang).toLowerCase().replace("_", "-");
    if (l.startsWith("zh-hant") || l === "zh-tw" || l === "zh-hk" || l === "zh-mo") return "zh-Hant";
    if (l.startsWith("en")) return "en";
  }
  return "en";
}

export function locale() {
  return current;
}

export function setLocale(next) {
  current = TABLES[next] ? next : "en";
  document.documentElement.lang = current;
  applyStatic(document);
  for (const fn of listeners) fn(current);
}

export function onLocaleChange(fn) {
  listeners.add(fn);
}

/** The text of `key` in the current language, with `{name}` placeholders filled in. */
export function t(key, params = {}) {
  const text = template(key);
  return text.replace(/\{(\w+)\}/g, (m, name) => (name in params ? String(params[name]) : m));
}

function template(key) {
  const text = TABLES[current][key];
  if (text !== undefined) return text;
  return en[key] === undefined ? key : en[key];
}

/**
 * Like t(), but a parameter may be a DOM node (e.g. a game code's element): the result is a
 * list of strings and nodes to append to an element.
 */
export function tNodes(key, params = {}) {
  const parts = template(key).split(/\{(\w+)\}/);
  const out = [];
  parts.forEach((part, i) => {
    if (i % 2 === 0) {
      if (part) out.push(part);
    } else if (!(part in params)) {
      out.push(`{${part}}`);
    } else {
      const value = params[part];
      out.push(value instanceof Node ? value : String(value));
    }
  });
  return out;
}

/**
 * A counted text: `key.one` / `key.other` (… as Intl.PluralRules picks for the current
 * language), with `{n}` and the other placeholders filled in. Both tables hold every form.
 */
export function tn(key, n, params = {}) {
  let form = "other";
  try {
    form = new Intl.PluralRules(current).select(n);
  } catch (err) {
    form = n === 1 ? "one" : "other";
  }
  const full = has(`${key}.${form}`) ? `${key}.${form}` : `${key}.other`;
  return t(full, { ...params, n });
}

/** Whether a key exists (used for optional texts such as error codes). */
export function has(key) {
  return key in TABLES[current] || key in en;
}

/** The spoken name of a card, e.g. "7 of spades" / "黑桃 7". */
export function cardName(card) {
  if (!card || card.length !== 2) return "";
  return t("card.name", { rank: t(`rank.${card[0]}`), suit: t(`suit.${card[1]}`) });
}

/** Fill every element marked with data-i18n (text), data-i18n-placeholder, data-i18n-aria-label. */
export function applyStatic(root) {
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of root.querySelectorAll("[data-i18n-placeholder]")) {
    el.placeholder = t(el.dataset.i18nPlaceholder);
  }
  for (const el of root.querySelectorAll("[data-i18n-aria-label]")) {
    el.setAttribute("aria-label", t(el.dataset.i18nAriaLabel));
  }
  for (const el of root.querySelectorAll("[data-i18n-title]")) el.title = t(el.dataset.i18nTitle);
  document.title = t("app.title");
}

/** Minutes and seconds, e.g. 83_000 → "1:23". */
export function formatTime(ms) {
  const total = Math.max(0, Math.floor((ms || 0) / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const ss = String(s).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}
