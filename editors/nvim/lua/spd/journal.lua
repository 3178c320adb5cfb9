-- :SpdJournal [kind]: the journal followed (journal.follow) into a
-- buffer, one event a line, resuming after the last event seen when spd
-- comes back.

local client = require('spd.client')
local ts = require('spd.termsafe')
local util = require('spd.util')

local J = {}

J.follows = {} -- buffer -> follow state

local function spd()
  return require('spd')
end

--- One line for a journal event, as `spctl journal` prints it: the
--- summary holds what agents chose and is escaped.
function J.line(e)
  local t = tonumber(e.time_us) or 0
  local s = string.format(
    '%6d %s %-10s %-16s %s',
    tonumber(e.id) or 0,
    os.date('%Y-%m-%d %H:%M:%S', math.floor(t / 1000000)),
    ts.field(type(e.actor) == 'string' and e.actor or '-'),
    ts.field(type(e.kind) == 'string' and e.kind or '-'),
    ts.field(type(e.summary) == 'string' and e.summary or '')
  )
  if type(e.session) == 'string' then
    s = s .. '  [session ' .. ts.field(e.session) .. ']'
  end
  return s
end

local function trim(st)
  local max = spd().config.journal_lines
  local n = vim.api.nvim_buf_line_count(st.buf)
  if n > max + 1 then
    -- Line 1 is the heading.
    util.set_lines(st.buf, 1, 1 + n - max - 1, {})
  end
end

local function connect(st)
  if st.stopped then
    return
  end
  st.conn = client.connect(spd().conn_opts({
    on_ready = function(c)
      st.delay = nil
      if st.lost then
        st.lost = false
        util.append(st.buf, { '-- reconnected to spd' })
      end
      local params = { since = st.since }
      if st.kind then
        params.kind = st.kind
      end
      c:request('journal.follow', params, function(err)
        if err and client.errcode(err) ~= 'DISCONNECTED' then
          util.append(st.buf, { '-- ' .. ts.field(client.errmsg(err)) })
        end
      end)
    end,
    on_notify = function(method, e)
      if method ~= 'journal.event' or type(e) ~= 'table' then
        return
      end
      local id = tonumber(e.id)
      if id and id > st.since then
        st.since = id
      end
      util.append(st.buf, { J.line(e) })
      trim(st)
    end,
    on_close = function(err)
      if st.stopped then
        return
      end
      if not st.lost then
        st.lost = true
        util.append(st.buf, { '-- ' .. ts.field(client.errmsg(err)) .. '; reconnecting' })
      end
      if client.errcode(err) == 'UNAUTHORIZED' then
        st.stopped = true
        spd().report('journal', err)
        return
      end
      local cfg = spd().config
      st.delay = st.delay and math.min(st.delay * 2, cfg.reconnect_max_ms) or cfg.reconnect_min_ms
      st.timer:stop()
      st.timer:start(st.delay, 0, vim.schedule_wrap(function()
        connect(st)
      end))
    end,
  }))
end

--- :SpdJournal [kind]: open a buffer following the journal (only events
--- of kind, when given).  Returns the buffer.
function J.open(kind)
  spd().ensure_watch()
  if kind == '' then
    kind = nil
  end
  local name = 'spd://journal' .. (kind and ('/' .. kind) or '')
  local b, new = util.scratch(name, 'spdjournal')
  if not new and J.follows[b] and not J.follows[b].stopped then
    util.show(b)
    return b
  end
  local uv = vim.uv or vim.loop
  local st = { buf = b, kind = kind, since = 0, timer = uv.new_timer() }
  J.follows[b] = st
  util.set_lines(b, 0, -1, {
    'spd journal' .. (kind and (' (kind ' .. ts.field(kind) .. ')') or '') .. ', following   q close',
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = b,
    callback = function()
      st.stopped = true
      st.timer:stop()
      st.timer:close()
      if st.conn then
        st.conn:close()
      end
      J.follows[b] = nil
    end,
  })
  util.show(b)
  connect(st)
  return b
end

return J
