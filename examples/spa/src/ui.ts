// A few DOM helpers, so each screen reads as the page it builds. No framework:
// the example is about the calls, and every line of it runs as written.
import { ApiFailure } from './clients.js';

/** Each screen renders itself into the page's <main>, reading what it shows from the API. */
export type Screen = (root: HTMLElement) => Promise<void>;

type Child = Node | string | number | null | undefined | false;
type Props<K extends keyof HTMLElementTagNameMap> = Partial<Omit<HTMLElementTagNameMap[K], 'dataset' | 'style'>> & {
  dataset?: Record<string, string>;
};

/** `h('button', { type: 'button', onclick }, 'Save')`. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props<K> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const { dataset, ...rest } = props;
  const element = Object.assign(document.createElement(tag), rest);
  if (dataset) Object.assign(element.dataset, dataset);
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

export const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const element = document.getElementById(id);
  if (!element) throw new Error(`#${id} is not on the page`);
  return element as T;
};

/** Asks the user to confirm it is them, then calls `retry` (main.ts sets it: step-up.ts). */
export type StepUpPrompt = (name: string, retry: () => Promise<void>) => void;
let stepUpPrompt: StepUpPrompt | null = null;
export const setStepUpPrompt = (prompt: StepUpPrompt): void => {
  stepUpPrompt = prompt;
};

/**
 * Runs one user action and reports it in `#status` ("<name>: ok" or
 * "<name>: failed") and `#error`: the page's only feedback channel, which
 * the browser suite reads too. A sensitive action refused with 403
 * STEP_UP_REQUIRED reports "<name>: confirm it's you" instead, opens the
 * prompt, and runs once more after the user confirmed (never a second prompt).
 */
export function action(name: string, run: () => Promise<unknown>): Promise<void> {
  return attempt(name, run, true);
}

async function attempt(name: string, run: () => Promise<unknown>, mayStepUp: boolean): Promise<void> {
  $('status').textContent = `${name}…`;
  $('error').textContent = '';
  try {
    await run();
    $('status').textContent = `${name}: ok`;
  } catch (error) {
    if (mayStepUp && stepUpPrompt && error instanceof ApiFailure && error.code === 'STEP_UP_REQUIRED') {
      $('status').textContent = `${name}: confirm it's you`;
      $('error').textContent = `${name}: ${error.message}`;
      stepUpPrompt(name, () => attempt(name, run, false));
      return;
    }
    // A CORS refusal surfaces here as a TypeError ("Failed to fetch"): the page learns nothing else.
    $('status').textContent = `${name}: failed`;
    $('error').textContent = `${name}: ${error instanceof Error ? error.message : String(error)}`;
  }
}

export interface Field<K extends string = string> {
  name: K;
  label: string;
  type?: string;
  placeholder?: string;
  required?: boolean;
  value?: string;
  autocomplete?: AutoFill;
}

export type FormValues<K extends string> = Record<K, string> & { all(name: string): string[] };

/**
 * A form whose submit runs `onSubmit` as the action `name`. Checkbox groups
 * (`extra`) come back through `values.all(name)`.
 */
export function form<K extends string>(
  id: string,
  name: string,
  fields: readonly Field<K>[],
  onSubmit: (values: FormValues<K>) => Promise<unknown>,
  extra: Child[] = [],
): HTMLFormElement {
  const element = h(
    'form',
    { id },
    ...fields.map((field) =>
      h(
        'label',
        {},
        h('span', {}, field.label),
        h('input', {
          name: field.name,
          type: field.type ?? 'text',
          placeholder: field.placeholder ?? '',
          required: field.required ?? true,
          value: field.value ?? '',
          autocomplete: field.autocomplete ?? 'off',
        }),
      ),
    ),
    ...extra,
    h('button', { type: 'submit' }, capitalize(name)),
  );
  element.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(element);
    const entries = fields.map((field) => [field.name, String(data.get(field.name) ?? '')]);
    const values = Object.assign(Object.fromEntries(entries) as Record<K, string>, {
      all: (key: string) => data.getAll(key).map(String),
    });
    void action(name, () => onSubmit(values));
  });
  return element;
}

/** Checkboxes named `name`, one per option, the `checked` ones ticked. */
export function checkboxes(name: string, options: readonly string[], checked: readonly string[] = []): HTMLElement {
  return h(
    'fieldset',
    { className: 'choices' },
    ...options.map((option) =>
      h('label', {}, h('input', { type: 'checkbox', name, value: option, checked: checked.includes(option) }), option),
    ),
  );
}

export function select(name: string, options: readonly { value: string; label: string }[], value = ''): HTMLElement {
  return h(
    'select',
    { name },
    ...options.map((option) => h('option', { value: option.value, selected: option.value === value }, option.label)),
  );
}

/** A button that runs `run` as the action `name`. */
export function button(name: string, run: () => Promise<unknown>, props: Props<'button'> = {}): HTMLButtonElement {
  const { textContent, ...rest } = props;
  return h('button', { type: 'button', ...rest, onclick: () => void action(name, run) }, textContent ?? name);
}

export function table(id: string, headings: string[], rows: Child[][]): HTMLTableElement {
  return h(
    'table',
    { id },
    h('thead', {}, h('tr', {}, ...headings.map((heading) => h('th', {}, heading)))),
    h('tbody', {}, ...rows.map((cells) => h('tr', {}, ...cells.map((cell) => h('td', {}, cell))))),
  );
}

export function section(title: string, ...children: Child[]): HTMLElement {
  return h('section', {}, h('h2', {}, title), ...children);
}

export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : '—');

const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

export const list = (value: string): string[] =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
