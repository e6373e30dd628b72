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

function chatBox() {
  const form = document.getElementById('chat');
  if (!form) return;
  const live = document.getElementById('live');
  const api = form.dataset.api;
  const session = form.dataset.session;
  const reload = { href: form.dataset.reload, label: 'show it in the stored conversation' };
  const busy = (on) => document.querySelectorAll('.chat-form button, .msg .actions button').forEach((b) => { b.disabled = on; });
  const run = async (request, shown) => {
    busy(true);
    if (shown !== undefined) bubble(live, 'user', shown);
    try {
      await streamChat(api, request, live, reload);
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
  for (const button of document.querySelectorAll('.msg .actions .regenerate')) {
    button.addEventListener('click', () => {
      const request = {
        trigger: 'regenerate-message',
        id: session,
        messages: [userMessage(button.dataset.uiId, button.dataset.prompt)],
      };
      live.append(element('p', 'note', `Regenerating the answer to #${button.closest('.msg').dataset.position}; the old answer stays a branch.`));
      run(request);
    });
  }
  for (const button of document.querySelectorAll('.msg .actions .edit')) {
    button.addEventListener('click', () => {
      const message = button.closest('.msg');
      if (message.querySelector('.edit-box')) return;
      const box = element('div', 'edit-box');
      const area = element('textarea');
      area.rows = 3;
      area.value = button.dataset.prompt;
      const send = element('button', '', 'Send edit');
      send.type = 'button';
      const cancel = element('button', 'link', 'Cancel');
      cancel.type = 'button';
      box.append(area, send, cancel);
      message.append(box);
      cancel.addEventListener('click', () => box.remove());
      send.addEventListener('click', () => {
        const text = area.value.trim();
        if (!text) return;
        box.remove();
        live.append(element('p', 'note', `Edited #${message.dataset.position}; the turns after it stay a branch.`));
        run({ trigger: 'submit-message', id: session, messages: [userMessage(button.dataset.uiId, text)] }, text);
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
