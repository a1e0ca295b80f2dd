// The chat page at "/": plain HTML, CSS and JavaScript in one document, no build step. It
// streams replies from /v1/chat/completions and keeps the conversation in the page. One reply
// streams at a time (Send is disabled meanwhile; Stop aborts it and keeps what came).
#include "deepinfer/serve/routes.h"

namespace deepinfer::serve {

const std::string& chat_page_html() {
  static const std::string kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>DeepInfer chat</title>
<style>
  :root { font-family: system-ui, sans-serif; color-scheme: light dark; }
  body { margin: 0; display: flex; height: 100vh; }
  aside { width: 16rem; padding: 1rem; border-right: 1px solid #8884; overflow-y: auto; }
  aside label { display: block; margin: .6rem 0 .2rem; font-size: .85rem; }
  aside input, aside textarea { width: 100%; box-sizing: border-box; }
  main { flex: 1; display: flex; flex-direction: column; min-width: 0; }
  #log { flex: 1; overflow-y: auto; padding: 1rem; }
  .msg { max-width: 48rem; margin: .5rem 0; padding: .6rem .8rem; border-radius: .6rem; white-space: pre-wrap; }
  .user { background: #3b82f622; margin-left: auto; }
  .assistant { background: #8882; }
  .error { background: #ef444433; }
  .stats { font-size: .75rem; opacity: .7; margin-top: .3rem; }
  .note { font-size: .75rem; color: #b45309; margin-top: .3rem; }
  form { display: flex; gap: .5rem; padding: 1rem; border-top: 1px solid #8884; }
  #prompt { flex: 1; resize: none; font: inherit; padding: .5rem; }
  button { font: inherit; padding: .5rem 1rem; }
</style>
</head>
<body>
<aside>
  <h3 style="margin-top:0">DeepInfer</h3>
  <div id="model" style="font-size:.85rem">model: …</div>
  <label for="system">System prompt</label>
  <textarea id="system" rows="3"></textarea>
  <label for="temperature">Temperature</label>
  <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7">
  <label for="max_tokens">Max tokens</label>
  <input id="max_tokens" type="number" min="1" value="256">
  <label for="seed">Seed (empty = random)</label>
  <input id="seed" type="number">
  <label for="apikey">API key (if the server needs one)</label>
  <input id="apikey" type="password">
  <p><button id="clear" type="button">New chat</button></p>
</aside>
<main>
  <div id="log"></div>
  <form id="form">
    <textarea id="prompt" rows="2" placeholder="Type a message; Enter sends, Shift+Enter for a new line"></textarea>
    <button id="send" type="submit">Send</button>
    <button id="stop" type="button" disabled>Stop</button>
  </form>
</main>
<script>
const $ = (id) => document.getElementById(id);
const history = [];
let modelName = '';
let busy = false;        // a reply is streaming
let controller = null;   // aborts it (Stop)
let chatId = 0;          // "New chat" starts another; a reply of an old one is not kept
$('apikey').value = localStorage.getItem('deepinfer_api_key') || '';
$('apikey').addEventListener('change', () => {
  localStorage.setItem('deepinfer_api_key', $('apikey').value);
  loadModel();
});

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if ($('apikey').value) h['Authorization'] = 'Bearer ' + $('apikey').value;
  return h;
}

async function loadModel() {
  try {
    const r = await fetch('/v1/models', { headers: headers() });
    if (r.status === 401) {
      modelName = '';
      $('model').textContent = 'model: (enter the API key)';
      return;
    }
    const j = await r.json();
    modelName = j.data[0].id;
    $('model').textContent = 'model: ' + modelName;
  } catch (e) { $('model').textContent = 'model: (unavailable)'; }
}

function setBusy(on) {
  busy = on;
  $('send').disabled = on;
  $('stop').disabled = !on;
}

function note(out, text, attr) {
  const div = document.createElement('div');
  div.className = 'note';
  div.textContent = text;
  out.appendChild(div);
  out.setAttribute(attr, '1');
}

function bubble(role, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  div.textContent = text;
  $('log').appendChild(div);
  $('log').scrollTop = $('log').scrollHeight;
  return div;
}

async function send(text) {
  setBusy(true);
  controller = new AbortController();
  if (!modelName) await loadModel();
  const myChat = chatId;
  history.push({ role: 'user', content: text });
  bubble('user', text);
  const out = bubble('assistant', '');
  out.setAttribute('data-streaming', '1');
  const messages = [];
  if ($('system').value.trim()) messages.push({ role: 'system', content: $('system').value });
  messages.push(...history);
  const body = { model: modelName || undefined, messages, stream: true,
                 stream_options: { include_usage: true },
                 temperature: parseFloat($('temperature').value), max_tokens: parseInt($('max_tokens').value) };
  if ($('seed').value !== '') body.seed = parseInt($('seed').value);
  const started = performance.now();
  let firstToken = 0, reply = '', usage = null, finish = null;
  try {
    const r = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(), body: JSON.stringify(body),
                                                    signal: controller.signal });
    if (!r.ok) {
      const err = await r.json().catch(() => ({ error: { message: r.statusText } }));
      throw new Error(err.error ? err.error.message : r.statusText);
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data: ')) continue;
          const data = line.slice(6);
          if (data === '[DONE]') continue;
          const chunk = JSON.parse(data);
          if (chunk.usage) usage = chunk.usage;
          for (const c of chunk.choices || []) {
            if (c.finish_reason) finish = c.finish_reason;
            if (c.delta && c.delta.content) {
              if (!firstToken) firstToken = performance.now();
              reply += c.delta.content;
              out.textContent = reply;
              $('log').scrollTop = $('log').scrollHeight;
            }
          }
        }
      }
    }
    if (myChat === chatId) history.push({ role: 'assistant', content: reply });
    const stats = document.createElement('div');
    stats.className = 'stats';
    const secs = (performance.now() - (firstToken || started)) / 1000;
    stats.textContent = usage ? `${usage.completion_tokens} tokens, first token ${((firstToken - started) / 1000).toFixed(2)} s, ` +
        `${(usage.completion_tokens / Math.max(secs, 1e-3)).toFixed(1)} tok/s, cached prompt ${usage.prompt_tokens_details.cached_tokens}` : '';
    out.appendChild(stats);
    if (finish === 'length') note(out, `cut at max tokens (${body.max_tokens}): raise "Max tokens" for longer replies`, 'data-cut');
  } catch (e) {
    if (e.name === 'AbortError') {
      // Keep what came, so the conversation stays in order.
      if (myChat === chatId) history.push({ role: 'assistant', content: reply });
      note(out, 'stopped', 'data-stopped');
    } else {
      out.className = 'msg error';
      out.textContent = 'Error: ' + e.message;
      if (myChat === chatId) history.pop();
    }
  }
  out.removeAttribute('data-streaming');
  out.setAttribute('data-done', '1');
  controller = null;
  setBusy(false);
}

$('form').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('prompt').value.trim();
  if (!text || busy) return;
  $('prompt').value = '';
  send(text);
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('form').requestSubmit(); }
});
$('stop').addEventListener('click', () => { if (controller) controller.abort(); });
$('clear').addEventListener('click', () => {
  chatId += 1;
  if (controller) controller.abort();
  history.length = 0;
  $('log').innerHTML = '';
});
loadModel();
</script>
</body>
</html>
)HTML";
  return kPage;
}

}  // namespace deepinfer::serve
