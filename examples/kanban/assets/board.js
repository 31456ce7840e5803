// board.js — the board page's behaviour, in plain JavaScript.
//
// The server renders the board as HTML (readable without this file) and puts
// the same board as JSON in #board-data. From then on this script renders
// from JSON: after every action of ours, and whenever the server-sent event
// stream says that someone changed the board, it refetches the board
// (GET /boards/ID/data, one consistent snapshot) and renders it again.
//
// Every action is a POST of JSON with an operation id made here; a POST that
// fails on the network is retried with the same id, so the server applies it
// once. A move carries the card's move version as this page saw it; if
// someone moved the card meanwhile the server refuses (409), and the page
// says so and shows the board as it now is.
//
// Moving a card: drag and drop (HTML5), or — on phones and keyboards — the
// card's dialog (click or Enter on a card) with "Move to list" and
// "Position".
'use strict';
(function () {
  const root = document.getElementById('board');
  if (!root) return;
  const boardId = Number(root.dataset.board);
  const base = '/boards/' + boardId;
  let state = JSON.parse(document.getElementById('board-data').textContent);

  let dragging = null;        // {id, version, el} while a card is dragged
  let openForm = null;        // {form, input, key}: the inline form open now
  let renderWanted = false;
  let fetching = false, fetchAgain = false;

  // ---- small helpers ----------------------------------------------------------

  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      const v = attrs[k];
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
    return e;
  }

  function opId() {
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function toast(text, warn) {
    const t = h('div', { class: 'toast' + (warn ? ' warn' : ''), role: 'status', text });
    document.getElementById('toasts').append(t);
    setTimeout(() => t.remove(), warn ? 6000 : 3500);
  }

  // POST body (an object) as JSON; retried with the same op id when the
  // network fails or the server is briefly overloaded (503).
  async function post(path, body) {
    body.op = opId();
    for (let attempt = 0; ; attempt++) {
      let r;
      try {
        r = await fetch(base + path, {
          method: 'POST',
          credentials: 'same-origin',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(body),
        });
      } catch (e) {
        if (attempt < 4) { await sleep(250 * 2 ** attempt); continue; }
        toast('The server cannot be reached; your change may not have been saved.', true);
        refetch();
        return null;
      }
      if (r.status === 503 && attempt < 4) { await sleep(250 * 2 ** attempt); continue; }
      let data = {};
      try { data = await r.json(); } catch (e) { /* keep {} */ }
      if (r.status === 401) { location.href = '/signin'; return null; }
      if (!r.ok) {
        const msg = (data.error && data.error.message) || ('The server answered ' + r.status);
        toast(msg, true);
        refetch();
        return null;
      }
      refetch();
      return data;
    }
  }

  // ---- fetching and rendering ------------------------------------------------------

  async function refetch() {
    if (fetching) { fetchAgain = true; return; }
    fetching = true;
    try {
      do {
        fetchAgain = false;
        const r = await fetch(base + '/data', { credentials: 'same-origin', cache: 'no-store' });
        if (r.status === 401) { location.href = '/signin'; return; }
        if (r.status === 403 || r.status === 404) { toast('This board is no longer yours to see.', true); return; }
        if (!r.ok) throw new Error('status ' + r.status);
        state = await r.json();
        render(); // also when the version is the same: it undoes a refused drop
      } while (fetchAgain);
    } catch (e) {
      setTimeout(refetch, 2000);
    } finally {
      fetching = false;
    }
  }

  function findCard(id) {
    for (const l of state.lists) for (const c of l.cards) if (c.id === id) return { list: l, card: c };
    return null;
  }

  function initials(name) { return name.slice(0, 2); }

  function hue(name) {
    let x = 0;
    for (const ch of name) x = (x * 31 + ch.charCodeAt(0)) % 360;
    return x;
  }

  function renderHead() {
    document.getElementById('board-title').textContent = state.title;
    document.title = state.title + ' · kanban';
    const m = document.getElementById('members');
    m.replaceChildren(...state.members.map((u) =>
      h('span', { class: 'avatar', title: u.name, style: 'background:hsl(' + hue(u.name) + ',55%,45%)', text: initials(u.name) })));
  }

  function cardEl(c) {
    // as web_page.c renders it: a list item, and in it a button named by the title
    return h('li', { class: 'card', draggable: 'true', 'data-card': c.id, 'data-version': c.version },
      h('div', { class: 'card-open', role: 'button', tabindex: '0',
                 'aria-label': c.title + (c.description ? ' (has a description)' : '') },
        h('span', { class: 'card-title', text: c.title }),
        c.description ? h('span', { class: 'card-badge', title: 'Has a description', 'aria-hidden': 'true', text: '☰' }) : null));
  }

  function listEl(l) {
    return h('section', { class: 'list', 'data-list': l.id },
      h('header', { class: 'list-head' },
        h('h2', { class: 'list-heading' },
          h('button', { class: 'list-title', type: 'button', title: 'Rename or archive the list', text: l.title })),
        h('span', { class: 'count', text: String(l.cards.length) }),
        h('button', { class: 'icon-btn list-menu', type: 'button', 'aria-label': 'List actions', text: '⋯' })),
      h('ol', { class: 'cards', 'data-list': l.id }, ...l.cards.map(cardEl)),
      h('button', { class: 'add-card', type: 'button', text: '+ Add a card' }));
  }

  // The open inline form's place in a freshly rendered board.
  function formAnchor(key) {
    if (key === 'list') return root.querySelector('.add-list-btn');
    return root.querySelector('.list[data-list="' + key + '"] .add-card');
  }

  function render() {
    if (dragging) { renderWanted = true; return; }
    renderWanted = false;
    renderHead();
    const add = h('section', { class: 'list add-list' },
      h('button', { class: 'add-list-btn', type: 'button', text: '+ Add a list' }));
    const hadFocus = openForm && openForm.form.contains(document.activeElement);
    root.replaceChildren(...state.lists.map(listEl), add);
    if (openForm) { // keep what is being typed, where it was
      const anchor = formAnchor(openForm.key);
      if (anchor) {
        anchor.replaceWith(openForm.form);
        if (hadFocus) openForm.input.focus();
      } else {
        openForm = null; // its list was archived meanwhile
      }
    }
    if (cardDlg.open) fillMoveSelects();
  }

  function renderLater() { if (renderWanted) render(); }

  // ---- inline forms: add a card, add a list ----------------------------------------------

  function inlineForm(key, placeholder, multiline, onSubmit) {
    if (openForm) openForm.close(); // one at a time (this renders the board again)
    const anchor = formAnchor(key);
    if (!anchor) return;
    const input = multiline
      ? h('textarea', { placeholder, maxlength: '200', required: true })
      : h('input', { type: 'text', placeholder, maxlength: '200', required: true });
    const form = h('form', { class: 'inline-form' }, input,
      h('div', { class: 'row' },
        h('button', { class: 'btn', type: 'submit', text: 'Add' }),
        h('button', { class: 'btn secondary', type: 'button', text: 'Cancel', onclick: () => done() })));
    function done() {
      if (!openForm || openForm.form !== form) return;
      openForm = null;
      render();
    }
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const text = input.value.trim();
      if (!text) return;
      input.value = '';
      await onSubmit(text);
      input.focus();
    });
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') done();
      if (multiline && e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
    });
    input.addEventListener('blur', () => setTimeout(() => {
      if (!form.contains(document.activeElement) && !input.value.trim()) done();
    }, 150));
    openForm = { form, input, key, close: done };
    anchor.replaceWith(form);
    input.focus();
  }

  // ---- dialogs ---------------------------------------------------------------------------

  const cardDlg = document.getElementById('card-dlg');
  const listDlg = document.getElementById('list-dlg');
  const textDlg = document.getElementById('text-dlg');
  let dlgCard = null;   // id of the card in the card dialog
  let dlgList = null;   // id of the list in the list dialog
  let textOk = null;

  for (const d of [cardDlg, listDlg, textDlg])
    d.addEventListener('click', (e) => { if (e.target.closest('[data-close]') || e.target === d) d.close(); });

  function fillMoveSelects(keepList) {
    const f = findCard(dlgCard);
    if (!f) { cardDlg.close(); toast('That card was archived or deleted meanwhile.', true); return; }
    const ls = document.getElementById('cd-list');
    const want = keepList !== undefined ? keepList : Number(ls.value || f.list.id);
    ls.replaceChildren(...state.lists.map((l) => h('option', { value: l.id, text: l.title, selected: l.id === want })));
    if (!state.lists.some((l) => l.id === want)) ls.value = String(f.list.id);
    fillPositions();
  }

  function fillPositions() {
    const f = findCard(dlgCard);
    if (!f) return;
    const target = state.lists.find((l) => l.id === Number(document.getElementById('cd-list').value));
    if (!target) return;
    const others = target.cards.filter((c) => c.id !== dlgCard);
    const ps = document.getElementById('cd-pos');
    const opts = [];
    for (let i = 0; i <= others.length; i++) {
      const label = i === 0 ? 'Top' : i === others.length ? 'Bottom' : String(i + 1);
      const here = target.id === f.list.id && target.cards.indexOf(f.card) === i;
      opts.push(h('option', { value: i, text: label + (here ? ' (here)' : ''), selected: here }));
    }
    if (target.id !== f.list.id) opts[opts.length - 1].selected = true;
    ps.replaceChildren(...opts);
  }

  document.getElementById('cd-list').addEventListener('change', () => fillPositions());

  function openCard(id) {
    const f = findCard(id);
    if (!f) return;
    dlgCard = id;
    document.getElementById('cd-title').value = f.card.title;
    document.getElementById('cd-desc').value = f.card.description || '';
    document.getElementById('cd-list').value = '';
    fillMoveSelects(f.list.id);
    cardDlg.showModal();
  }

  document.getElementById('cd-save').addEventListener('click', async () => {
    const f = findCard(dlgCard);
    if (!f) return;
    const title = document.getElementById('cd-title').value.trim();
    if (!title) { toast('A card needs a title.', true); return; }
    const description = document.getElementById('cd-desc').value;
    cardDlg.close();
    if (title === f.card.title && description === (f.card.description || '')) return;
    await post('/cards/' + dlgCard + '/edit', { title, description });
  });

  document.getElementById('cd-move').addEventListener('click', async () => {
    const f = findCard(dlgCard);
    if (!f) return;
    const list = Number(document.getElementById('cd-list').value);
    const index = Number(document.getElementById('cd-pos').value);
    cardDlg.close();
    await move(f.card, list, index);
  });

  document.getElementById('cd-archive').addEventListener('click', async () => {
    const id = dlgCard;
    cardDlg.close();
    if (await post('/cards/' + id + '/archive', { archived: true })) toast('Card archived.');
  });

  function openList(id) {
    const l = state.lists.find((x) => x.id === id);
    if (!l) return;
    dlgList = id;
    document.getElementById('ld-title').value = l.title;
    listDlg.showModal();
  }

  document.getElementById('ld-save').addEventListener('click', async () => {
    const l = state.lists.find((x) => x.id === dlgList);
    const title = document.getElementById('ld-title').value.trim();
    listDlg.close();
    if (!l || !title || title === l.title) return;
    await post('/lists/' + dlgList + '/rename', { title });
  });

  document.getElementById('ld-archive').addEventListener('click', async () => {
    const id = dlgList;
    listDlg.close();
    if (await post('/lists/' + id + '/archive', { archived: true })) toast('List archived.');
  });

  function askText(head, label, value, maxlength, ok) {
    document.getElementById('td-head').textContent = head;
    document.getElementById('td-label').textContent = label;
    const input = document.getElementById('td-input');
    input.value = value;
    input.maxLength = maxlength;
    textOk = ok;
    textDlg.showModal();
    input.select();
  }

  function textSubmit() {
    const v = document.getElementById('td-input').value.trim();
    textDlg.close();
    if (v && textOk) textOk(v);
  }
  document.getElementById('td-ok').addEventListener('click', textSubmit);
  document.getElementById('td-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { e.preventDefault(); textSubmit(); }
  });

  document.getElementById('board-title').addEventListener('click', () =>
    askText('Rename the board', 'Title', state.title, 200, (title) => {
      if (title !== state.title) post('/rename', { title });
    }));

  document.getElementById('add-member').addEventListener('click', () =>
    askText('Add a member', 'Their user name', '', 32, async (name) => {
      if (await post('/members', { name })) toast(name + ' can now see and change this board.');
    }));

  // ---- moving cards ---------------------------------------------------------------------

  async function move(card, list, index) {
    const res = await post('/cards/' + card.id + '/move', { list, index, version: card.version });
    return res;
  }

  // Where among `ol`'s cards (the dragged one left out) a drop at clientY lands.
  function dropIndex(ol, y) {
    const cards = [...ol.querySelectorAll('.card:not(.dragging)')];
    for (let i = 0; i < cards.length; i++) {
      const r = cards[i].getBoundingClientRect();
      if (y < r.top + r.height / 2) return { index: i, before: cards[i] };
    }
    return { index: cards.length, before: null };
  }

  const mark = h('li', { class: 'drop-mark', 'aria-hidden': 'true' });

  function clearDrag() {
    mark.remove();
    for (const l of root.querySelectorAll('.list.over')) l.classList.remove('over');
    if (dragging) dragging.el.classList.remove('dragging');
    dragging = null;
  }

  root.addEventListener('dragstart', (e) => {
    const el = e.target.closest && e.target.closest('.card');
    if (!el) return;
    const f = findCard(Number(el.dataset.card));
    if (!f) { e.preventDefault(); return; }
    dragging = { id: f.card.id, version: f.card.version, el };
    e.dataTransfer.effectAllowed = 'move';
    e.dataTransfer.setData('text/plain', String(f.card.id));
    setTimeout(() => { if (dragging) el.classList.add('dragging'); }, 0);
  });

  root.addEventListener('dragover', (e) => {
    if (!dragging) return;
    const list = e.target.closest && e.target.closest('.list:not(.add-list)');
    if (!list) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'move';
    const ol = list.querySelector('.cards');
    for (const l of root.querySelectorAll('.list.over')) if (l !== list) l.classList.remove('over');
    list.classList.add('over');
    const at = dropIndex(ol, e.clientY);
    if (at.before) { if (mark.nextSibling !== at.before || mark.parentNode !== ol) ol.insertBefore(mark, at.before); }
    else if (mark.parentNode !== ol || mark.nextSibling) ol.append(mark);
  });

  root.addEventListener('drop', async (e) => {
    if (!dragging) return;
    const list = e.target.closest && e.target.closest('.list:not(.add-list)');
    if (!list) { clearDrag(); renderLater(); return; }
    e.preventDefault();
    const ol = list.querySelector('.cards');
    const at = dropIndex(ol, e.clientY);
    const d = dragging;
    const f = findCard(d.id);
    const listId = Number(list.dataset.list);
    if (f && f.list.id === listId && f.list.cards.indexOf(f.card) === at.index) {
      // dropped where it already was: nothing to do
      clearDrag();
      renderLater();
      return;
    }
    // show it where it was dropped at once; the refetch after the answer confirms
    if (at.before) ol.insertBefore(d.el, at.before); else ol.append(d.el);
    d.el.classList.add('moving');
    clearDrag();
    await move({ id: d.id, version: d.version }, listId, at.index);
    renderLater();
  });

  root.addEventListener('dragend', () => { clearDrag(); renderLater(); });

  // ---- clicks and keys on the board -----------------------------------------------------------

  root.addEventListener('click', (e) => {
    const t = e.target;
    const card = t.closest('.card');
    if (card) { openCard(Number(card.dataset.card)); return; }
    const listSec = t.closest('.list');
    if (t.closest('.list-title') || t.closest('.list-menu')) { openList(Number(listSec.dataset.list)); return; }
    if (t.closest('.add-card')) {
      const listId = Number(listSec.dataset.list);
      inlineForm(String(listId), 'Card title', true,
        (title) => post('/cards', { list: listId, title }));
      return;
    }
    if (t.closest('.add-list-btn')) {
      inlineForm('list', 'List title', false, (title) => post('/lists', { title }));
    }
  });

  root.addEventListener('keydown', (e) => {
    const card = e.target.closest && e.target.closest('.card');
    if (card && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); openCard(Number(card.dataset.card)); }
  });

  // ---- live updates ----------------------------------------------------------------------------

  const live = document.getElementById('live');
  let es = null, retryMs = 1000;

  function connect() {
    es = new EventSource(base + '/events');
    es.addEventListener('hello', () => {
      live.textContent = 'live';
      live.classList.add('on');
      retryMs = 1000;
      refetch(); // whatever happened while we were away
    });
    es.addEventListener('change', () => refetch());
    es.onerror = () => {
      live.textContent = 'reconnecting…';
      live.classList.remove('on');
      if (es.readyState === EventSource.CLOSED) { // the browser gave up: try again ourselves
        es.close();
        refetch(); // signed out meanwhile? it goes to the sign-in page
        setTimeout(connect, retryMs);
        retryMs = Math.min(retryMs * 2, 15000);
      }
    };
  }

  render();
  connect();
  window.kanban = { state: () => state, refetch }; // for tests and the curious
})();
