// Bobbin playground page. Everything shown comes from /api/view as data
// and is put on the page with textContent and createElement only: no
// string is ever parsed as HTML or run as code, and there are no inline
// handlers (the server's Content-Security-Policy forbids them anyway).
'use strict';

const $ = (id) => document.getElementById(id);

const state = {
  ws: null,
  model: null,
  as: '',
  channel: '',
  thread: '',
  assistant: false, // the thread pane shows an assistant thread
  callsSeq: 0,
  calls: [],
  rendered: new Map(), // list element id -> Map(ts -> {el, json})
  modalJSON: '',
  modalID: '',
};

// --- text nodes ---------------------------------------------------------

const TAGS = {
  b: 'strong', i: 'em', s: 'del', code: 'code', pre: 'pre', quote: 'blockquote', p: 'p', h: 'h4',
  ul: 'ul', ol: 'ol', li: 'li', a: 'a', br: 'br', hr: 'hr', mention: 'span',
  table: 'table', tr: 'tr', th: 'th', td: 'td',
};

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

function nodes(list, parent) {
  for (const n of list || []) parent.append(node(n));
  return parent;
}

function node(n) {
  const tag = n.t ? TAGS[n.t] : undefined;
  if (!tag) {
    const f = document.createDocumentFragment();
    if (n.x) f.append(document.createTextNode(n.x));
    nodes(n.c, f);
    return f;
  }
  const e = document.createElement(tag);
  if (n.t === 'a') {
    if (/^(https?:|mailto:)/i.test(n.h || '')) {
      e.href = n.h;
      e.target = '_blank';
      e.rel = 'noopener noreferrer';
    }
  }
  if (n.t === 'mention') e.className = 'mention';
  if (n.x) e.append(document.createTextNode(n.x));
  nodes(n.c, e);
  return e;
}

// --- API ----------------------------------------------------------------

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Bobbin-Playground': '1' },
    body: JSON.stringify(body),
  };
  const resp = await fetch(path, opts);
  let data = {};
  try { data = await resp.json(); } catch (_) { /* empty body */ }
  if (!resp.ok) throw new Error(data.error || resp.statusText);
  return data;
}

// --- blocks -------------------------------------------------------------

// The reaction picker's choices (the server names the emoji of
// reactions already on a message).
const PICK = { '+1': '👍', white_check_mark: '✅', eyes: '👀', tada: '🎉', heart: '❤️', rocket: '🚀' };

// button renders a Block Kit button; ctx says where a click goes.
function button(b, ctx) {
  const btn = el('button', 'btn' + (b.style ? ' ' + b.style : ''), b.label || 'Button');
  btn.type = 'button';
  btn.dataset.action = b.action_id || '';
  btn.addEventListener('click', async () => {
    if (b.confirm && !(await confirmDialog(b.confirm))) return;
    if (b.url) window.open(b.url, '_blank', 'noopener,noreferrer');
    click(ctx, b.action_id, b.value || '');
  });
  return btn;
}

function element(e, ctx) {
  switch (e.kind) {
    case 'button': return button(e, ctx);
    case 'text': return nodes(e.text, el('span', 'ctx-text'));
    case 'image': return el('span', 'ctx-image', e.label ? '🖼 ' + e.label : '🖼');
    case 'select': {
      const label = el('label', 'select');
      label.append(el('span', 'visually-hidden', e.label || 'Choose'));
      const sel = el('select');
      sel.append(el('option', '', e.label || 'Choose…'));
      for (const o of e.options || []) {
        const opt = el('option', '', o.label);
        opt.value = o.value;
        sel.append(opt);
      }
      sel.addEventListener('change', () => click(ctx, e.action_id, sel.value));
      label.append(sel);
      return label;
    }
  }
  return el('span', 'unsupported', '[' + (e.label || 'element') + ']');
}

let inputSeq = 0;

function block(b, ctx) {
  switch (b.type) {
    case 'section': {
      const d = el('div', 'block section');
      const main = nodes(b.text, el('div', 'text'));
      d.append(main);
      if (b.fields && b.fields.length) {
        const f = el('div', 'fields');
        for (const field of b.fields) f.append(nodes(field, el('div', 'field')));
        d.append(f);
      }
      if (b.accessory) d.append(element(b.accessory, ctx));
      return d;
    }
    case 'markdown':
    case 'rich_text':
      return nodes(b.text, el('div', 'block md'));
    case 'header':
      return nodes(b.text, el('h3', 'block header'));
    case 'divider':
      return el('hr', 'block divider');
    case 'context': {
      const d = el('div', 'block context');
      for (const e of b.elements || []) d.append(element(e, ctx));
      return d;
    }
    case 'actions': {
      const d = el('div', 'block actions');
      d.setAttribute('role', 'group');
      for (const e of b.elements || []) d.append(element(e, ctx));
      return d;
    }
    case 'input': {
      const d = el('div', 'block input');
      const id = 'in-' + (++inputSeq);
      const inp = b.input || { kind: 'unsupported' };
      const group = inp.kind === 'checkboxes' || inp.kind === 'radio';
      const label = el(group ? 'span' : 'label', 'label', b.label + (b.optional ? ' (optional)' : ''));
      label.id = id + '-label';
      if (!group) label.htmlFor = id;
      d.append(label);
      const selected = new Set(inp.selected || []);
      let field;
      if (group) {
        // A group of checkboxes or radio buttons, read as one input.
        field = el('div', 'choices');
        field.setAttribute('role', inp.kind === 'radio' ? 'radiogroup' : 'group');
        field.setAttribute('aria-labelledby', label.id);
        field.dataset.kind = inp.kind;
        (inp.options || []).forEach((o, i) => {
          const row = el('label', 'choice');
          const box = el('input');
          box.type = inp.kind === 'radio' ? 'radio' : 'checkbox';
          box.name = id;
          box.id = id + '-' + i;
          box.value = o.value;
          box.checked = selected.has(o.value);
          row.append(box, ' ' + o.label);
          field.append(row);
        });
      } else if (inp.kind === 'select' || inp.kind === 'multi_select') {
        field = el('select');
        if (inp.kind === 'multi_select') { field.multiple = true; field.dataset.kind = 'multi_select'; }
        else if (b.optional) { const none = el('option', '', inp.label || '—'); none.value = ''; field.append(none); }
        for (const o of inp.options || []) {
          const opt = el('option', '', o.label);
          opt.value = o.value;
          opt.selected = selected.has(o.value);
          field.append(opt);
        }
      } else if (inp.kind === 'number') {
        field = el('input');
        field.type = 'number';
        field.step = inp.decimal ? 'any' : '1';
        if (inp.min) field.min = inp.min;
        if (inp.max) field.max = inp.max;
        if (inp.initial) field.value = inp.initial;
        if (inp.placeholder) field.placeholder = inp.placeholder;
      } else if (inp.kind === 'date') {
        field = el('input');
        field.type = 'date';
        if (inp.initial) field.value = inp.initial;
      } else if (inp.kind === 'text_input') {
        field = inp.multiline ? el('textarea') : el('input');
        if (!inp.multiline) field.type = 'text';
        if (inp.placeholder) field.placeholder = inp.placeholder;
        if (inp.initial) field.value = inp.initial;
        if (inp.max_length) field.maxLength = inp.max_length;
      } else {
        field = el('input');
        field.disabled = true;
        field.value = '[unsupported input]';
      }
      field.id = id;
      field.dataset.block = b.block_id || '';
      field.dataset.action = inp.action_id || '';
      if (!group) field.required = !b.optional;
      d.append(field);
      const describedBy = [];
      if (b.hint) {
        const h = el('p', 'hint', b.hint);
        h.id = id + '-hint';
        describedBy.push(h.id);
        d.append(h);
      }
      if (b.error) {
        const er = el('p', 'field-error', b.error);
        er.id = id + '-err';
        describedBy.push(er.id);
        field.setAttribute('aria-invalid', 'true');
        d.append(er);
        d.classList.add('has-error');
      }
      if (describedBy.length) field.setAttribute('aria-describedby', describedBy.join(' '));
      return d;
    }
    case 'image': {
      const d = el('div', 'block image');
      const text = '🖼 ' + (b.label || b.alt || 'image');
      if (b.url) {
        const a = el('a', '', text);
        a.href = b.url;
        a.target = '_blank';
        a.rel = 'noopener noreferrer';
        d.append(a);
      } else d.append(text);
      return d;
    }
    case 'task':
      return nodes(b.text, el('div', 'block task'));
  }
  return el('div', 'block unsupported', '[' + (b.name || 'unsupported') + ' block]');
}

// --- messages -----------------------------------------------------------

function fmtTime(ms) {
  const d = new Date(ms);
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
}

function messageEl(m, inThread) {
  const li = el('li', 'msg' + (m.bot ? ' bot' : '') + (m.ephemeral ? ' ephemeral' : '') + (m.streaming ? ' streaming' : ''));
  li.dataset.ts = m.ts;
  const avatar = el('div', 'avatar', (m.author || '?').slice(0, 1).toUpperCase());
  avatar.setAttribute('aria-hidden', 'true');
  li.append(avatar);
  const body = el('div', 'msg-body');
  const head = el('div', 'msg-head');
  head.append(el('strong', 'author', m.author));
  if (m.bot) head.append(el('span', 'tag', 'APP'));
  const t = el('time', 'time', fmtTime(m.time));
  t.dateTime = new Date(m.time).toISOString();
  head.append(t);
  if (m.edited) head.append(el('span', 'meta', '(edited)'));
  if (m.streaming) head.append(el('span', 'meta live', 'streaming…'));
  if (m.ephemeral) head.append(el('span', 'meta only-you', 'Only visible to you'));
  body.append(head);

  const ctx = { channel: state.channel, ts: m.ts };
  const content = el('div', 'msg-content');
  if (m.blocks && m.blocks.length) for (const b of m.blocks) content.append(block(b, ctx));
  else nodes(m.text, content);
  body.append(content);

  if (m.files && m.files.length) {
    const fl = el('div', 'files');
    for (const f of m.files) {
      const card = el('div', 'file');
      if (f.image && !f.gone) {
        const img = el('img');
        img.src = '/api/files/' + encodeURIComponent(f.id);
        img.alt = f.name;
        img.loading = 'lazy';
        card.append(img);
      }
      const a = el('a', '', f.name + ' · ' + f.type + ' · ' + Math.ceil(f.size / 1024) + ' KB' + (f.gone ? ' (removed)' : ''));
      if (!f.gone) a.href = '/api/files/' + encodeURIComponent(f.id);
      card.append(a);
      fl.append(card);
    }
    body.append(fl);
  }

  if (!m.ephemeral) {
    const bar = el('div', 'msg-actions');
    for (const r of m.reactions || []) {
      const rb = el('button', 'reaction' + (r.mine ? ' mine' : ''), r.emoji + ' ' + r.count);
      rb.type = 'button';
      rb.setAttribute('aria-pressed', r.mine ? 'true' : 'false');
      rb.setAttribute('aria-label', r.name + ', ' + r.count + (r.mine ? ', including you' : ''));
      rb.addEventListener('click', () => react(m.ts, r.name, !r.mine));
      bar.append(rb);
    }
    const add = el('button', 'reaction add', '☺+');
    add.type = 'button';
    add.setAttribute('aria-label', 'Add a reaction');
    add.addEventListener('click', () => pickReaction(add, m.ts));
    bar.append(add);
    if (!inThread) {
      const rt = el('button', 'link-btn', m.replies ? m.replies + (m.replies === 1 ? ' reply' : ' replies') : 'Reply in thread');
      rt.type = 'button';
      rt.addEventListener('click', () => openThread(m.ts, false));
      bar.append(rt);
    }
    body.append(bar);
  }
  li.append(body);
  return li;
}

function pickReaction(anchor, ts) {
  const old = document.querySelector('.picker');
  if (old) old.remove();
  const p = el('div', 'picker');
  p.setAttribute('role', 'group');
  p.setAttribute('aria-label', 'Pick a reaction');
  for (const [name, ch] of Object.entries(PICK)) {
    const b = el('button', 'reaction', ch);
    b.type = 'button';
    b.setAttribute('aria-label', name);
    b.addEventListener('click', () => { p.remove(); react(ts, name, true); });
    p.append(b);
  }
  anchor.after(p);
  p.querySelector('button').focus();
  p.addEventListener('keydown', (e) => { if (e.key === 'Escape') { p.remove(); anchor.focus(); } });
}

// renderList updates a message list in place: only messages whose data
// changed are rebuilt, so focus and scroll survive updates.
function renderList(listEl, msgs, inThread) {
  let seen = state.rendered.get(listEl.id);
  if (!seen) { seen = new Map(); state.rendered.set(listEl.id, seen); }
  const atBottom = listEl.scrollHeight - listEl.scrollTop - listEl.clientHeight < 40;
  const keep = new Set();
  let prev = null;
  for (const m of msgs) {
    keep.add(m.ts);
    const json = JSON.stringify(m);
    let entry = seen.get(m.ts);
    if (!entry || entry.json !== json) {
      const fresh = messageEl(m, inThread);
      const hadFocus = entry && entry.el.contains(document.activeElement);
      if (entry) entry.el.replaceWith(fresh);
      entry = { el: fresh, json };
      seen.set(m.ts, entry);
      if (hadFocus) {
        const again = fresh.querySelector('button:not([disabled])');
        if (again) again.focus();
      }
    }
    const want = prev ? prev.nextSibling : listEl.firstChild;
    if (entry.el !== want) listEl.insertBefore(entry.el, want);
    prev = entry.el;
  }
  for (const [ts, entry] of seen) {
    if (!keep.has(ts)) { entry.el.remove(); seen.delete(ts); }
  }
  if (atBottom) listEl.scrollTop = listEl.scrollHeight;
}

function clearList(listEl) {
  listEl.replaceChildren();
  state.rendered.delete(listEl.id);
}

// --- modal --------------------------------------------------------------

function renderModal(modal) {
  const dlg = $('modal');
  if (!modal) {
    state.modalJSON = '';
    state.modalID = '';
    if (dlg.open) dlg.close();
    return;
  }
  const json = JSON.stringify(modal);
  if (json === state.modalJSON && dlg.open) return;
  // Keep what the person typed when the same view comes back (with
  // errors, or updated).
  const typed = {};
  if (state.modalID === modal.id) {
    for (const f of $('modal-body').querySelectorAll('[data-block]')) if (!f.dataset.kind) typed[f.dataset.block + '/' + f.dataset.action] = f.value;
  }
  state.modalJSON = json;
  state.modalID = modal.id;
  $('modal-title').textContent = modal.title;
  const body = $('modal-body');
  body.replaceChildren();
  const ctx = { view: modal.id };
  for (const b of modal.blocks) body.append(block(b, ctx));
  for (const f of body.querySelectorAll('[data-block]')) {
    const k = f.dataset.block + '/' + f.dataset.action;
    if (k in typed) f.value = typed[k];
  }
  $('modal-submit').hidden = !modal.submit;
  $('modal-submit').textContent = modal.submit || 'Submit';
  $('modal-close').textContent = modal.close || 'Cancel';
  $('modal-error').textContent = '';
  if (!dlg.open) dlg.showModal();
  const invalid = body.querySelector('[aria-invalid="true"]');
  const first = invalid || body.querySelector('input, textarea, select, button');
  if (first) first.focus();
}

// inputValue reads one form input as the emulator's SubmitViewInputs
// takes it: a string, or a list of option values.
function inputValue(f) {
  switch (f.dataset.kind) {
    case 'checkboxes': return [...f.querySelectorAll('input:checked')].map((i) => i.value);
    case 'radio': { const c = f.querySelector('input:checked'); return c ? c.value : ''; }
    case 'multi_select': return [...f.selectedOptions].map((o) => o.value);
  }
  return f.value;
}

async function submitModal(ev) {
  ev.preventDefault();
  const values = {};
  for (const f of $('modal-body').querySelectorAll('[data-block]')) {
    if (!f.dataset.block || !f.dataset.action) continue;
    values[f.dataset.block] = inputValue(f);
  }
  $('modal-error').textContent = '';
  try {
    await api('/api/submit', { as: state.as, view_id: state.modalID, values });
  } catch (e) {
    $('modal-error').textContent = e.message;
  }
  refresh();
}

async function closeModal() {
  const id = state.modalID;
  if (!id) { $('modal').close(); return; }
  try { await api('/api/close', { as: state.as, view_id: id }); } catch (_) { /* already closed */ }
  refresh();
}

function confirmDialog(c) {
  return new Promise((resolve) => {
    const dlg = $('confirm');
    $('confirm-title').textContent = c.title || 'Are you sure?';
    const text = $('confirm-text');
    text.replaceChildren();
    nodes(c.text, text);
    const yes = $('confirm-yes');
    const no = $('confirm-no');
    yes.textContent = c.confirm || 'Yes';
    yes.className = 'btn ' + (c.style || 'primary');
    no.textContent = c.deny || 'Cancel';
    const done = (v) => {
      yes.removeEventListener('click', onYes);
      no.removeEventListener('click', onNo);
      dlg.removeEventListener('cancel', onNo);
      if (dlg.open) dlg.close();
      resolve(v);
    };
    const onYes = () => done(true);
    const onNo = (e) => { if (e) e.preventDefault(); done(false); };
    yes.addEventListener('click', onYes);
    no.addEventListener('click', onNo);
    dlg.addEventListener('cancel', onNo);
    dlg.showModal();
    no.focus();
  });
}

// --- actions ------------------------------------------------------------

function showError(where, msg) {
  const e = $(where);
  if (e) e.textContent = msg;
}

async function click(ctx, actionID, value) {
  try {
    await api('/api/click', { as: state.as, channel: ctx.view ? '' : ctx.channel, ts: ctx.ts || '', view_id: ctx.view || '', action_id: actionID, value });
  } catch (e) {
    showError(ctx.view ? 'modal-error' : 'composer-error', e.message);
  }
}

async function react(ts, name, add) {
  try { await api('/api/react', { as: state.as, channel: state.channel, ts, name, add }); } catch (e) { showError('composer-error', e.message); }
}

// chosen holds each composer's files: choosing again adds to them, as in
// Slack (an input's own list is replaced on every choice).
const chosen = {};

function showChosen(filesId) {
  $(filesId.replace('files', 'filelist')).textContent = (chosen[filesId] || []).map((f) => f.name).join(', ');
}

function readFiles(filesId) {
  return Promise.all((chosen[filesId] || []).map((f) => new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve({ name: f.name, data: String(r.result).replace(/^data:[^,]*,/, '') });
    r.onerror = () => reject(new Error('could not read ' + f.name));
    r.readAsDataURL(f);
  })));
}

async function send(textId, filesId, errId, thread) {
  const ta = $(textId);
  const files = $(filesId);
  showError(errId, '');
  if (textId === 'reply-text' && !thread) {
    showError(errId, 'Open a thread first.');
    return;
  }
  try {
    const data = await readFiles(filesId);
    await api('/api/post', { as: state.as, channel: state.channel, thread: thread || '', text: ta.value, files: data });
    ta.value = '';
    files.value = '';
    chosen[filesId] = [];
    showChosen(filesId);
  } catch (e) {
    showError(errId, e.message);
  }
  refresh();
}

function wireComposer(formId, textId, filesId, errId, mentionId, threadOf) {
  const form = $(formId);
  const ta = $(textId);
  form.addEventListener('submit', (e) => { e.preventDefault(); send(textId, filesId, errId, threadOf()); });
  ta.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
  });
  $(mentionId).addEventListener('click', () => {
    ta.value = (ta.value && !ta.value.endsWith(' ') ? ta.value + ' ' : ta.value) + '@' + state.ws.bot_name + ' ';
    ta.focus();
  });
  $(filesId).addEventListener('change', (e) => {
    chosen[filesId] = (chosen[filesId] || []).concat([...e.target.files]);
    e.target.value = '';
    showChosen(filesId);
  });
}

// --- navigation ---------------------------------------------------------

function me() { return state.ws.people.find((p) => p.id === state.as); }

function saveHash() {
  const p = new URLSearchParams({ as: state.as, c: state.channel });
  if (state.thread) p.set('t', state.thread);
  if (state.assistant) p.set('a', '1');
  history.replaceState(null, '', '#' + p.toString());
}

function channelLabel(id) {
  const r = state.ws.rooms.find((x) => x.id === id);
  if (r) return '#' + r.name;
  return state.ws.bot_name + ' (direct message)';
}

function renderNav() {
  const rooms = $('rooms');
  rooms.replaceChildren();
  for (const r of state.ws.rooms) rooms.append(navItem(r.id, '# ' + r.name));
  const dms = $('dms');
  dms.replaceChildren();
  dms.append(navItem(me().dm, state.ws.bot_name));
  const p = me();
  $('who-about').textContent = p.about;
  const title = channelLabel(state.channel);
  $('channel-title').textContent = title;
  const room = state.ws.rooms.find((x) => x.id === state.channel);
  $('channel-topic').textContent = room ? room.topic : 'Your direct messages with ' + state.ws.bot_name + '. Only you see them.';
  $('composer-text').placeholder = 'Message ' + title + ' — try “@' + state.ws.bot_name + ' hello” or “/bobbin help” (Enter sends, Shift+Enter for a new line)';
  document.title = title + ' · Bobbin playground';
}

function navItem(id, label) {
  const li = el('li');
  const b = el('button', 'nav' + (id === state.channel ? ' current' : ''), label);
  b.type = 'button';
  if (id === state.channel) b.setAttribute('aria-current', 'page');
  b.addEventListener('click', () => openChannel(id));
  li.append(b);
  return li;
}

function openChannel(id) {
  state.channel = id;
  closeThread(false);
  clearList($('messages'));
  renderNav();
  saveHash();
  refresh();
  $('composer-text').focus();
}

function openThread(ts, assistant) {
  state.thread = ts;
  state.assistant = !!assistant;
  clearList($('thread-messages'));
  $('thread').hidden = false;
  $('thread-title').textContent = assistant ? state.ws.bot_name + ' — assistant' : 'Thread';
  $('assistant-bar').hidden = !assistant;
  saveHash();
  refresh();
  $('reply-text').focus();
}

function closeThread(save) {
  state.thread = '';
  state.assistant = false;
  $('thread').hidden = true;
  clearList($('thread-messages'));
  if (save !== false) { saveHash(); refresh(); }
}

async function openAssistant() {
  try {
    const ctx = state.channel;
    const r = await api('/api/assistant', { as: state.as, context: ctx });
    state.channel = r.channel;
    clearList($('messages'));
    renderNav();
    openThread(r.ts, true);
  } catch (e) {
    showError('composer-error', e.message);
  }
}

// --- refresh ------------------------------------------------------------

let inflight = false;
let dirty = false;

async function refresh() {
  if (!state.ws) return;
  if (inflight) { dirty = true; return; }
  inflight = true;
  try {
    do {
      dirty = false;
      const q = new URLSearchParams({ as: state.as, channel: state.channel, calls: String(state.callsSeq) });
      if (state.thread) q.set('thread', state.thread);
      const v = await api('/api/view?' + q.toString());
      render(v);
    } while (dirty);
  } catch (e) {
    $('conn').textContent = 'The playground is not answering: ' + e.message;
  } finally {
    inflight = false;
  }
}

function render(v) {
  renderList($('messages'), v.channel || [], false);
  if (state.thread) {
    renderList($('thread-messages'), v.thread || [], true);
    renderAssistant(v.assistant);
  }
  renderModal(v.modal);
  renderCalls(v.calls || []);
  const f = $('failures');
  f.hidden = !(v.failures && v.failures.length);
  f.textContent = (v.failures || []).join(' ');
  $('conn').textContent = v.connected ? '● ' + state.ws.bot_name + ' is connected (socket mode)' : '○ ' + state.ws.bot_name + ' is not connected yet…';
  $('conn').className = 'conn' + (v.connected ? ' up' : '');
}

function renderAssistant(a) {
  if (!state.assistant || !a) return;
  $('assistant-status').textContent = a.status ? state.ws.bot_name + ' ' + a.status : '';
  if (a.title) $('thread-title').textContent = a.title;
  const box = $('assistant-prompts');
  const json = JSON.stringify(a.prompts || []);
  if (box.dataset.json === json) return;
  box.dataset.json = json;
  box.replaceChildren();
  for (const p of a.prompts || []) {
    const b = el('button', 'btn prompt', p.title);
    b.type = 'button';
    b.addEventListener('click', async () => {
      try {
        await api('/api/post', { as: state.as, channel: state.channel, thread: state.thread, text: p.message, files: [] });
      } catch (e) { showError('reply-error', e.message); }
      refresh();
    });
    box.append(b);
  }
}

function renderCalls(calls) {
  if (!calls.length) return;
  for (const c of calls) state.callsSeq = Math.max(state.callsSeq, c.seq);
  state.calls = state.calls.concat(calls).slice(-300);
  const body = $('calls-body');
  for (const c of calls) {
    const tr = el('tr', c.status === 429 ? 'limited' : (c.ok ? '' : 'failed'));
    tr.append(el('td', 'time', fmtTime(c.time)));
    tr.append(el('td', 'method', c.method));
    tr.append(el('td', 'status', c.status === 429 ? '429 rate-limited' : (c.ok ? 'ok' : c.error || String(c.status))));
    body.prepend(tr);
  }
  while (body.children.length > 300) body.lastChild.remove();
  const limited = state.calls.filter((c) => c.status === 429).length;
  $('calls-summary').textContent = state.calls.length + ' calls shown' + (limited ? ' · ' + limited + ' rate-limited (429)' : '') + ', newest first.';
}

// --- start --------------------------------------------------------------

async function start() {
  const s = await api('/api/state');
  state.ws = s.workspace;
  state.model = s.model;
  $('ws-name').textContent = state.ws.team_name;
  const who = $('who');
  for (const p of state.ws.people) {
    const o = el('option', '', p.real_name + ' — ' + p.role);
    o.value = p.id;
    who.append(o);
  }
  const h = new URLSearchParams(location.hash.slice(1));
  state.as = state.ws.people.some((p) => p.id === h.get('as')) ? h.get('as') : state.ws.people[0].id;
  who.value = state.as;
  const known = (id) => state.ws.rooms.some((r) => r.id === id) || id === me().dm;
  state.channel = known(h.get('c')) ? h.get('c') : state.ws.rooms[0].id;
  who.addEventListener('change', () => {
    const wasDM = state.channel === me().dm;
    state.as = who.value;
    if (wasDM) state.channel = me().dm;
    clearList($('messages'));
    clearList($('thread-messages'));
    state.modalJSON = '';
    if (wasDM) closeThread(false);
    renderNav();
    saveHash();
    refresh();
  });

  const model = $('model');
  model.replaceChildren();
  if (s.model.demo) {
    model.classList.add('demo');
    model.append(el('strong', '', 'Demo model'));
    model.append(el('span', '', ' — a short script, not an LLM. Set LLM_PROVIDER, LLM_BASE_URL and LLM_MODEL to use a real one.'));
  } else {
    model.append(el('strong', '', 'Model: ' + s.model.name));
    model.append(el('span', '', ' ' + s.model.endpoint));
  }
  $('mcp').textContent = s.mcp ? 'MCP servers: ' + s.mcp : 'No MCP servers mounted (set MCP_CONFIG).';

  wireComposer('composer', 'composer-text', 'composer-files', 'composer-error', 'mention-btn', () => '');
  wireComposer('reply', 'reply-text', 'reply-files', 'reply-error', 'reply-mention-btn', () => state.thread);
  $('thread-close').addEventListener('click', () => closeThread());
  $('open-assistant').addEventListener('click', openAssistant);
  $('modal-form').addEventListener('submit', submitModal);
  $('modal-close').addEventListener('click', closeModal);
  $('modal-x').addEventListener('click', closeModal);
  $('modal').addEventListener('cancel', (e) => { e.preventDefault(); closeModal(); });

  renderNav();
  if (h.get('t')) openThread(h.get('t'), h.get('a') === '1');
  saveHash();
  const es = new EventSource('/api/events');
  es.addEventListener('change', () => refresh());
  refresh();
}

document.addEventListener('DOMContentLoaded', () => {
  start().catch((e) => { $('conn').textContent = 'Could not load the playground: ' + e.message; });
});
