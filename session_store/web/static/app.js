// session-store web: expanding parts, local times, branch switching, and chat answers streamed as they come.
// No framework and no build step; text from the server is only ever set with textContent, never parsed as HTML.
'use strict';

function newId() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return 'web-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function localTimes() {
  for (const node of document.querySelectorAll('time[datetime]')) {
    const moment = new Date(node.getAttribute('datetime'));
    if (isNaN(moment)) continue;
    const pad = (n) => String(n).padStart(2, '0');
    node.title = node.getAttribute('datetime');
    node.textContent = `${moment.getFullYear()}-${pad(moment.getMonth() + 1)}-${pad(moment.getDate())} ` +
      `${pad(moment.getHours())}:${pad(moment.getMinutes())}`;
  }
}

function expanders() {
  const conversation = document.getElementById('conversation');
  const toggle = (open) => () => conversation.querySelectorAll('details').forEach((d) => { d.open = open; });
  const expand = document.getElementById('expand-all');
  const collapse = document.getElementById('collapse-all');
  if (conversation && expand) expand.addEventListener('click', toggle(true));
  if (conversation && collapse) collapse.addEventListener('click', toggle(false));
  const select = document.getElementById('branch-select');
  if (select) select.addEventListener('change', () => select.form.submit());
}

// --- chat -------------------------------------------------------------------------------------------

function bubble(live, role, text) {
  const article = element('article', `msg role-${role}`);
  const header = element('header');
  header.append(element('span', 'who', role));
  article.append(header);
  if (text !== undefined) {
    const part = element('div', `part ${role}`);
    part.append(element('div', 'text', text));
    article.append(part);
  }
  live.append(article);
  return article;
}

function errorText(body) {
  try {
    const parsed = JSON.parse(body);
    return parsed.error || parsed.errorText || body;
  } catch (e) {
    return body;
  }
}

// Posts one Vercel AI chat request and renders the streamed answer; resolves to true once the run was stored.
async function streamChat(api, request, live, done) {
  const answer = bubble(live, 'assistant');
  answer.classList.add('streaming');
  answer.dataset.state = 'streaming';
  answer.dataset.deltas = '0';
  const status = element('div', 'status', 'streaming…');
  answer.querySelector('header').append(status);
  let text = null;
  let thinking = null;
  let saved = false;
  const fail = (message) => {
    answer.dataset.state = 'failed';
    status.className = 'status failed';
    status.textContent = message;
  };
  const handle = (chunk) => {
    switch (chunk.type) {
      case 'text-start':
        text = null;
        break;
      case 'text-delta': {
        if (!text) {
          const part = element('div', 'part assistant');
          text = element('div', 'text', '');
          part.append(text);
          answer.append(part);
        }
        text.textContent += chunk.delta;
        answer.dataset.deltas = String(Number(answer.dataset.deltas) + 1);
        break;
      }
      case 'reasoning-start':
        thinking = null;
        break;
      case 'reasoning-delta': {
        if (!thinking) {
          thinking = element('div', 'text', '');
          const part = element('div', 'part thinking');
          part.append(element('span', 'tag', 'thinking '), thinking);
          answer.append(part);
        }
        thinking.textContent += chunk.delta;
        break;
      }
      case 'tool-input-available': {
        const part = element('div', 'part tool-call');
        part.append(element('span', 'arrow', '→ '), element('code', '', `${chunk.toolName}(${JSON.stringify(chunk.input)})`));
        answer.append(part);
        text = null;
        break;
      }
      case 'tool-output-available': {
        const part = element('div', 'part tool-return');
        part.append(element('span', 'arrow', '⇐ '), element('code', '', JSON.stringify(chunk.output)));
        answer.append(part);
        text = null;
        break;
      }
      case 'error':
        fail(chunk.errorText || 'The run failed.');
        break;
      case 'data-conversation-saved':
        saved = true;
        break;
      default:
        break;
    }
  };
  let response;
  try {
    response = await fetch(api, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      credentials: 'same-origin',
      body: JSON.stringify(request),
    });
  } catch (error) {
    fail(`The server did not answer: ${error}`);
    return false;
  }
  if (!response.ok) {
    fail(`${response.status}: ${errorText(await response.text())}`);
    return false;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done: finished } = await reader.read();
    if (finished) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') continue;
        try {
          handle(JSON.parse(data));
        } catch (error) {
          fail(`Unreadable event: ${data.slice(0, 80)}`);
        }
      }
    }
  }
  answer.classList.remove('streaming');
  if (answer.dataset.state === 'failed') return false;
  if (!saved) {
    fail('The answer ended without being stored.');
    return false;
  }
  answer.dataset.state = 'saved';
  status.className = 'status saved';
  status.textContent = 'stored ✓ ';
  if (done) {
    const link = element('a', '', done.label);
    link.href = done.href;
    status.append(link);
  }
  return true;
}

function userMessage(uiId, text) {
  return { id: uiId, role: 'user', parts: [{ type: 'text', text }] };
}

// What the store holds of the session now: its active path's length and its branches (the API lists them once the
// session has more than one path). `null` if it could not be read.
async function readSession(url) {
  try {
    const response = await fetch(url, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
    if (!response.ok) return null;
    const page = await response.json();
    return { count: page.message_count, branches: page.branches || [] };
  } catch (error) {
    return null;
  }
}

function forkText(branch) {
  return branch.forked_at === null || branch.forked_at === undefined ? 'from the start' : `at #${branch.forked_at}`;
}

// What the store did with a message sent again at `position` (an edit, a regenerate), told from the session as it
// was read before the request and after it: whether a new branch became the active path and where it forks, or the
// message was appended to the same path, or nothing was stored. Never what the request meant to do.
function whatHappened(before, after, position, action) {
  if (!after) {
    return { outcome: 'unknown', text: 'The session could not be read back: reload the page to see what the store holds.' };
  }
  const active = after.branches.find((b) => b.active);
  if (!before) {
    const where = active ? `branch ${active.number} (${active.message_count} messages, ${forkText(active)})` : 'one path';
    return { outcome: 'unknown', text: `The session now holds ${after.count} messages on its active path, ${where}.` };
  }
  const known = new Set(before.branches.map((b) => b.tip));
  const was = before.branches.find((b) => b.active);
  if (active && !known.has(active.tip) && after.branches.length > Math.max(1, before.branches.length)) {
    const left = was ? after.branches.find((b) => b.tip === was.tip) : after.branches.find((b) => !b.active);
    const kept = left ? ` on branch ${left.number} (${left.message_count} messages)` : ' as a branch';
    const replaced = action === 'edit' ? 'the turns it replaced stay' : 'the answer it replaced stays';
    const lead = action === 'edit' ? `Edited #${position}` : `Answered #${position} again`;
    const fork = active.forked_at === null || active.forked_at === undefined ? 0 : active.forked_at;
    return {
      outcome: 'branched',
      fork,
      at: fork,
      text: `${lead}: the store started branch ${active.number} ${forkText(active)}, now the active path ` +
        `(${active.message_count} messages); ${replaced}${kept}.`,
    };
  }
  const same = (was && active && was.tip === active.tip) || (!was && !active);
  if (same && after.count > before.count) {
    const what = action === 'edit' ? 'the edited message' : 'the message';
    return {
      outcome: 'appended',
      at: before.count,
      text: `The store did not replace #${position}: it appended ${what} as a new turn at #${before.count}, on the ` +
        'same path, and no branch was made.',
    };
  }
  if (same && after.count === before.count) {
    return { outcome: 'unchanged', text: `Nothing was stored: the session is as it was before #${position} was sent again.` };
  }
  const where = active ? `branch ${active.number} (${active.message_count} messages, ${forkText(active)})` : 'its one path';
  return { outcome: 'moved', text: `The session's active path is now ${where}, with ${after.count} messages.` };
}

// Marks the page's messages from `fork` on as no longer on the active path; their buttons would send them again
// to a path that does not hold them.
function markReplaced(fork, note) {
  for (const message of document.querySelectorAll('#conversation .msg')) {
    if (Number(message.dataset.position) < fork) continue;
    message.classList.add('replaced');
    const actions = message.querySelector('.actions');
    if (actions) actions.remove();
    const box = message.querySelector('.edit-box');
    if (box) box.remove();
  }
  for (const marker of document.querySelectorAll('#conversation .window-marker')) marker.classList.add('replaced');
  note.classList.add('branched');
}

function chatBox() {
  const form = document.getElementById('chat');
  if (!form) return;
  // What the page knows the session to be: as it was shown, then as each request from this page left it.
  const activeTip = (read) => {
    const active = read.branches.find((b) => b.active);
    return active ? active.tip : '';
  };
  const know = (read) => {
    if (!read) return;
    form.dataset.count = String(read.count);
    form.dataset.active = activeTip(read);
  };
  // Whether the session, as read just before a message was sent again, is not the one the page knows: another
  // tab or client moved it since.
  const outOfDate = (before) =>
    Boolean(before) && (before.count !== Number(form.dataset.count) || activeTip(before) !== form.dataset.active);
  const live = document.getElementById('live');
  const api = form.dataset.api;
  const session = form.dataset.session;
  const reload = { href: form.dataset.reload, label: 'show it in the stored conversation' };
  const busy = (on) => document.querySelectorAll('.chat-form button, .msg .actions button, .edit-box button').forEach((b) => { b.disabled = on; });
  const run = async (request, shown) => {
    busy(true);
    if (shown !== undefined) bubble(live, 'user', shown);
    try {
      await streamChat(api, request, live, reload);
      know(await readSession(form.dataset.read));
    } finally {
      busy(false);
    }
  };
  // A message sent again: the session is read before and after, and the note says what the store did.
  const resend = async (request, shown, position, action, pending) => {
    busy(true);
    const note = element('p', 'note resend', pending);
    note.dataset.outcome = 'pending';
    live.append(note);
    note.scrollIntoView({ block: 'nearest' });
    try {
      const before = await readSession(form.dataset.read);
      if (shown !== undefined) bubble(live, 'user', shown);
      await streamChat(api, request, live, null);
      const after = await readSession(form.dataset.read);
      const told = whatHappened(before, after, position, action);
      const stale = outOfDate(before);
      know(after);
      note.dataset.outcome = told.outcome;
      note.dataset.stale = String(stale);
      const changed = stale ? 'This page was out of date: the session had changed since it was shown. ' : '';
      note.textContent = `${changed}${told.text} `;
      if (told.at !== undefined) {
        const link = element('a', '', 'show it in the stored conversation');
        link.href = `${form.dataset.reload}?at=${told.at}#m${told.at}`;
        note.append(link);
      }
      if (told.outcome === 'branched') markReplaced(told.fork, note);
      if (told.outcome === 'appended') note.classList.add('warn');
      note.scrollIntoView({ block: 'start' }); // the note, then the turn it tells of
    } finally {
      busy(false);
    }
  };
  const textarea = form.querySelector('textarea');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const text = textarea.value.trim();
    if (!text) return;
    textarea.value = '';
    run({ trigger: 'submit-message', id: session, messages: [userMessage(newId(), text)] }, text);
  });
  textarea.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  // Each user message's buttons resend it under the id the store finds it by (its UI message id, else its entry id).
  for (const button of document.querySelectorAll('.msg .actions .regenerate')) {
    button.addEventListener('click', () => {
      const actions = button.closest('.actions');
      const position = button.closest('.msg').dataset.position;
      const request = {
        trigger: 'regenerate-message',
        id: session,
        messages: [userMessage(actions.dataset.messageId, actions.dataset.prompt)],
      };
      resend(request, undefined, position, 'regenerate', `Answering #${position} again…`);
    });
  }
  for (const button of document.querySelectorAll('.msg .actions .edit')) {
    button.addEventListener('click', () => {
      const message = button.closest('.msg');
      const actions = button.closest('.actions');
      if (message.querySelector('.edit-box')) return;
      const box = element('div', 'edit-box');
      const area = element('textarea');
      area.rows = 3;
      area.value = actions.dataset.prompt;
      const send = element('button', '', 'Send edit');
      send.type = 'button';
      const cancel = element('button', 'link', 'Cancel');
      cancel.type = 'button';
      box.append(area, send, cancel);
      message.append(box);
      area.focus();
      cancel.addEventListener('click', () => box.remove());
      send.addEventListener('click', () => {
        const text = area.value.trim();
        if (!text) return;
        box.remove();
        const position = message.dataset.position;
        const request = { trigger: 'submit-message', id: session, messages: [userMessage(actions.dataset.messageId, text)] };
        resend(request, text, position, 'edit', `Editing #${position}…`);
      });
    });
  }
}

function newChat() {
  const form = document.getElementById('new-chat');
  if (!form) return;
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const session = form.elements.session.value.trim();
    const text = form.elements.text.value.trim();
    if (!session || !text) return;
    const live = form.querySelector('.live');
    const button = form.querySelector('button');
    button.disabled = true;
    bubble(live, 'user', text);
    const href = `${form.dataset.root}/sessions/${encodeURIComponent(session)}`;
    try {
      await streamChat(form.dataset.api, { trigger: 'submit-message', id: session, messages: [userMessage(newId(), text)] },
        live, { href, label: `open ${session}` });
    } finally {
      button.disabled = false;
    }
  });
}

document.addEventListener('DOMContentLoaded', () => {
  localTimes();
  expanders();
  chatBox();
  newChat();
});
