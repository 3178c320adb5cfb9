-- :SpdApprovals, :SpdApprove, :SpdDeny and the watch behind them: one
-- connection follows approval.list (every pending ask, then each new one
-- as an approval.requested notification), reconnecting when spd goes away.

local client = require('spd.client')
local ts = require('spd.termsafe')
local util = require('spd.util')

local A = {}

A.NAME = 'spd://approvals'

A.pending = {} -- id -> the ask as spd sent it
A.connected = false
A.last_error = nil -- why the watch is not connected, escaped

local conn = nil
local seen = {} -- ids already announced, so a replay is not announced again
local timer = nil
local delay = nil
local stopped = true
local lost = false -- the watch was connected and lost it
local line_ids = {} -- buffer line (1-based) -> approval id

local function spd()
  return require('spd')
end

function A.count()
  local n = 0
  for _ in pairs(A.pending) do
    n = n + 1
  end
  return n
end

-- ---- showing an ask (spctl's cmd_print_object) --------------------------

local function digest(e)
  if type(e.blake2b) == 'string' then
    return 'blake2b ' .. ts.field(e.blake2b:sub(1, 16))
  end
  return string.format('%s bytes, mtime %s', tostring(e.size), tostring(e.mtime_ns))
end

--- The lines that show what a grant of object o covers, each prefixed with
--- indent: every string in it is the agent's, escaped, argv shell-quoted.
function A.object_lines(o, indent)
  local lines = {}
  if type(o) ~= 'table' then
    return lines
  end
  local function str(v)
    return type(v) == 'string' and v or nil
  end
  if type(o.argv) == 'table' then
    lines[#lines + 1] = indent .. 'run: ' .. ts.argv(o.argv)
  elseif str(o.path) then
    local l = indent .. ts.field(str(o.kind) or '?') .. ' ' .. ts.arg(o.path)
    if str(o.path2) then
      -- A move writes its destination: that is the path that decides.
      l = l .. ' -> ' .. ts.arg(o.path2)
    end
    lines[#lines + 1] = l
  elseif str(o.host) then
    -- A proxy run's connection to an ask-host.
    lines[#lines + 1] = indent
      .. 'connect '
      .. ts.arg(o.host)
      .. ' port '
      .. tostring(tonumber(o.port) or '?')
      .. ", through the run's network proxy"
  end
  if type(o.env) == 'table' then
    local names = vim.tbl_keys(o.env)
    table.sort(names)
    for _, k in ipairs(names) do
      lines[#lines + 1] = indent .. '  env ' .. ts.field(k) .. '=' .. ts.arg(str(o.env[k]) or '')
    end
  end
  if str(o.cwd) then
    lines[#lines + 1] = indent .. '  cwd ' .. ts.arg(o.cwd)
  end
  if type(o.argv) == 'table' and str(o.net) then
    local nets = {
      host = 'host',
      loopback = 'loopback',
      proxy = "proxy (only spd's egress proxy)",
      broker = "broker (only spd's model broker)",
    }
    local net = nets[o.net] or 'none'
    lines[#lines + 1] = indent .. '  network ' .. net
  end
  if type(o.content) == 'table' then
    local c = o.content
    lines[#lines + 1] = string.format(
      '%s  content %s bytes %s, first line: %s%s',
      indent,
      tostring(c.size),
      digest(c),
      ts.arg(str(c.preview) or ''),
      c.preview_complete == true and '' or ' ...'
    )
  end
  if type(o.files) == 'table' then
    for _, e in ipairs(o.files) do
      if type(e) == 'table' then
        lines[#lines + 1] = indent .. '  file ' .. ts.arg(str(e.path) or '') .. ' ' .. digest(e)
      end
    end
  end
  return lines
end

--- The heading line of an ask: "approval N  session S  rule: reason".
function A.heading(a)
  local s = type(a.session) == 'string' and a.session or '-'
  return string.format(
    'approval %d  session %s  %s: %s',
    tonumber(a.id) or 0,
    ts.field(s),
    ts.field(type(a.rule) == 'string' and a.rule or '?'),
    ts.field(type(a.reason) == 'string' and a.reason or '')
  )
end

-- ---- the buffer ------------------------------------------------------------

local function buf()
  return util.find(A.NAME)
end

local function sorted_ids()
  local ids = vim.tbl_keys(A.pending)
  table.sort(ids)
  return ids
end

--- Redraw :SpdApprovals from A.pending (when the buffer exists).
function A.render()
  local b = buf()
  if not b then
    return
  end
  local lines = {
    'spd approvals   a approve · d deny (asks a reason) · r refresh · q close',
  }
  if A.connected then
    lines[#lines + 1] = 'following spd'
  else
    lines[#lines + 1] = 'NOT CONNECTED: ' .. (A.last_error or 'connecting') .. ' (retrying)'
  end
  lines[#lines + 1] = ''
  line_ids = {}
  local ids = sorted_ids()
  if #ids == 0 then
    lines[#lines + 1] = 'no pending approvals'
  end
  for _, id in ipairs(ids) do
    local a = A.pending[id]
    lines[#lines + 1] = A.heading(a)
    line_ids[#lines] = id
    for _, l in ipairs(A.object_lines(a.object, '    ')) do
      lines[#lines + 1] = l
      line_ids[#lines] = id
    end
    lines[#lines + 1] = ''
  end
  util.set_lines(b, 0, -1, lines)
end

--- The approval id of the ask under the cursor in :SpdApprovals, or nil.
function A.id_at_cursor()
  return line_ids[vim.api.nvim_win_get_cursor(0)[1]]
end

--- Grant (approve true) or refuse approval id; why optional.  cb(err, res)
--- after the message is shown.
function A.decide(id, approve, why, cb)
  spd().ensure_watch()
  local params = { id = id, approve = approve }
  if type(why) == 'string' and why ~= '' then
    params.why = why
  end
  spd().request('approval.decide', params, function(err, res)
    if err then
      spd().report('approval ' .. id, err)
      A.refresh()
    elseif type(res) == 'table' and res.decision == 'stale' then
      A.pending[id] = nil
      util.notify(
        string.format(
          'approval %d not used: a file it pinned changed before your decision; the call was refused and must ask again',
          id
        ),
        vim.log.levels.WARN
      )
    else
      A.pending[id] = nil
      util.notify(string.format('approval %d %s', id, approve and 'granted' or 'refused'))
    end
    A.render()
    if cb then
      cb(err, res)
    end
  end)
end

--- Ask for a reason, then refuse approval id (nothing when the prompt is
--- cancelled).
function A.deny_asking(id)
  vim.ui.input({ prompt = string.format('Deny approval %d, reason (optional): ', id) }, function(why)
    if why == nil then
      return
    end
    A.decide(id, false, why)
  end)
end

--- Replace the list with spd's (asks decided elsewhere leave it).
function A.refresh(cb)
  spd().request('approval.list', nil, function(err, res)
    if not err and type(res) == 'table' and type(res.pending) == 'table' then
      A.pending = {}
      for _, a in ipairs(res.pending) do
        if type(a) == 'table' and tonumber(a.id) then
          A.pending[tonumber(a.id)] = a
          seen[tonumber(a.id)] = true
        end
      end
      A.render()
    end
    if cb then
      cb(err, res)
    end
  end)
end

--- :SpdApprovals: open (or focus) the list of pending asks.
function A.open()
  spd().ensure_watch()
  local b, new = util.scratch(A.NAME, 'spdapprovals')
  if new then
    local function on_line(f)
      return util.on_line(A.id_at_cursor, 'approval', f)
    end
    local o = { buffer = b, silent = true, nowait = true }
    vim.keymap.set('n', 'a', on_line(function(id)
      A.decide(id, true)
    end), vim.tbl_extend('force', o, { desc = 'approve the ask under the cursor' }))
    vim.keymap.set('n', 'd', on_line(A.deny_asking), vim.tbl_extend('force', o, { desc = 'deny the ask under the cursor' }))
    vim.keymap.set('n', 'r', function()
      A.refresh()
    end, vim.tbl_extend('force', o, { desc = 'refresh' }))
  end
  A.render()
  util.show(b)
  if A.connected then
    A.refresh()
  end
end

-- ---- the watch ---------------------------------------------------------------

local function announce(a)
  if not spd().config.notify or util.visible(buf()) then
    return
  end
  local lines = { A.heading(a) }
  for _, l in ipairs(A.object_lines(a.object, '  ')) do
    lines[#lines + 1] = l
  end
  lines[#lines + 1] = ':SpdApprovals to decide'
  util.notify(table.concat(lines, '\n'), vim.log.levels.WARN)
end

local function on_notify(method, p)
  if type(p) ~= 'table' or not tonumber(p.id) then
    return
  end
  local id = tonumber(p.id)
  if method == 'approval.requested' then
    A.pending[id] = p
    if not seen[id] then
      seen[id] = true
      announce(p)
    end
    A.render()
  elseif method == 'approval.withdrawn' then
    if A.pending[id] then
      A.pending[id] = nil
      util.notify(string.format('approval %d withdrawn: %s', id, ts.field(p.reason or '')))
      A.render()
    end
  elseif method == 'approval.decided' then
    -- Decided elsewhere (spctl approve, another editor, the 10-minute
    -- limit): the ask is no longer spd's to decide, so not ours to list.
    if A.pending[id] then
      A.pending[id] = nil
      local words = { approved = 'granted', refused = 'refused', stale = 'not used' }
      util.notify(string.format('approval %d %s: %s', id, words[p.decision] or 'decided', ts.field(p.reason or '')))
      A.render()
    end
  end
end

local function schedule_retry()
  if stopped then
    return
  end
  local uv = vim.uv or vim.loop
  if not timer then
    timer = uv.new_timer()
  end
  local cfg = spd().config
  delay = delay and math.min(delay * 2, cfg.reconnect_max_ms) or cfg.reconnect_min_ms
  timer:stop()
  timer:start(delay, 0, vim.schedule_wrap(function()
    if not stopped then
      A.watch()
    end
  end))
end

local function on_close(err)
  local was = A.connected
  A.connected = false
  A.last_error = ts.field(client.errmsg(err))
  conn = nil
  if client.errcode(err) == 'UNAUTHORIZED' then
    -- Trying again with the same token will not help: say so once and
    -- wait for the next command.
    stopped = true
    util.notify(A.last_error, vim.log.levels.ERROR)
  elseif was then
    lost = true
    util.notify('lost the connection to spd (' .. A.last_error .. '); reconnecting', vim.log.levels.WARN)
  end
  A.render()
  schedule_retry()
end

--- Follow the approvals (idempotent): a connection that reconnects with a
--- growing delay whenever spd goes away, until A.stop().
function A.watch()
  stopped = false
  if conn and conn:is_open() then
    return
  end
  if timer then
    timer:stop()
  end
  conn = client.connect(spd().conn_opts({
    on_ready = function(c)
      if c ~= conn then
        return
      end
      A.connected = true
      A.last_error = nil
      delay = nil
      -- The follow starts by sending every pending ask again; asks of an
      -- spd that went away are gone with it.
      A.pending = {}
      seen = {}
      if lost then
        lost = false
        util.notify('reconnected to spd')
      end
      A.render()
      c:request('approval.list', { follow = true }, function(err)
        if err and client.errcode(err) ~= 'DISCONNECTED' then
          spd().report('approvals', err)
        end
      end)
    end,
    on_notify = on_notify,
    on_close = on_close,
  }))
end

--- Stop following the approvals.
function A.stop()
  stopped = true
  if timer then
    timer:stop()
  end
  if conn then
    conn:close()
    conn = nil
  end
  A.connected = false
end

return A
