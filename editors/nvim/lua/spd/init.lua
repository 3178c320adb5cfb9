-- spd inside Neovim: approvals, runs, sessions and the journal, over spd's
-- socket with the operator token.  See :help spd.

local client = require('spd.client')
local ts = require('spd.termsafe')
local util = require('spd.util')

local M = {}

M.config = {
  -- Where spd listens and the operator token; nil: as spd resolves them
  -- (SPD_RUNTIME_DIR, SPD_CONFIG_DIR, the XDG directories, the defaults).
  socket = nil,
  token_file = nil,
  -- Follow the approvals from setup() on, and say when an ask arrives
  -- while :SpdApprovals is hidden.
  watch = true,
  notify = true,
  -- The first and the longest wait between attempts to reach spd again.
  reconnect_min_ms = 200,
  reconnect_max_ms = 5000,
  -- Journal lines a :SpdJournal buffer keeps (the oldest go first).
  journal_lines = 5000,
}

--- Connection options for client.connect from the configuration.
function M.conn_opts(extra)
  local o = { socket = M.config.socket, token_file = M.config.token_file }
  for k, v in pairs(extra or {}) do
    o[k] = v
  end
  return o
end

-- ---- short requests: one shared connection ------------------------------

local main = nil

local function shared()
  if not main or not main:is_open() then
    local c
    c = client.connect(M.conn_opts({
      on_close = function()
        if main == c then
          main = nil
        end
      end,
    }))
    main = c
  end
  return main
end

--- Send one request on the shared connection (opened, authenticated and
--- reopened as needed); cb(err, result) on the main loop.  A connection
--- that turns out to be to an spd that has since gone away (restarted
--- while the editor idled) is replaced and the request sent once more.
function M.request(method, params, cb)
  local c = shared()
  local was_ready = c.ready
  c:request(method, params, function(err, res)
    if err and was_ready and client.errcode(err) == 'DISCONNECTED' then
      shared():request(method, params, cb or function() end)
      return
    end
    if cb then
      cb(err, res)
    end
  end)
end

--- Report a failed request: "spd: what: message (CODE)", escaped.
function M.report(what, err)
  util.notify(what .. ': ' .. ts.field(client.errmsg(err)), vim.log.levels.ERROR)
end

--- Close every connection the plugin holds (the approvals watch, the
--- shared one); runs and journal buffers keep theirs.
function M.disconnect()
  require('spd.approvals').stop()
  if main then
    main:close()
    main = nil
  end
end

--- Configure the plugin (see :help spd-config) and start following the
--- approvals unless watch is false.
function M.setup(opts)
  M.config = vim.tbl_extend('force', M.config, opts or {})
  M.disconnect()
  if M.config.watch then
    require('spd.approvals').watch()
  end
end

--- Start following the approvals if the configuration says so and it is
--- not yet done; every command calls this.
function M.ensure_watch()
  if M.config.watch then
    require('spd.approvals').watch()
  end
end

-- ---- :SpdStatus ---------------------------------------------------------

local function layer_line(name, l)
  local s = name .. ' ' .. (l.ok and 'ok' or 'MISSING')
  if type(l.abi) == 'number' then
    s = s .. ' (abi ' .. l.abi .. ')'
  end
  if not l.ok and l.required then
    s = s .. ' (required)'
  end
  return s
end

--- The lines :SpdStatus shows for a daemon.status result.
function M.status_lines(r)
  local lines = {}
  local function num(v)
    return type(v) == 'number' and string.format('%d', v) or '?'
  end
  lines[#lines + 1] = string.format(
    'spd %s, pid %s, up %s s, %s connections',
    ts.field(r.version),
    num(r.pid),
    num(r.uptime_s),
    num(r.connections)
  )
  lines[#lines + 1] = 'socket ' .. ts.field(r.socket)
  if type(r.journal) == 'table' then
    lines[#lines + 1] = string.format('journal: %s events, %s bytes', num(r.journal.events), num(r.journal.bytes))
  end
  lines[#lines + 1] = 'sandbox mode ' .. ts.field(r.sandbox_mode)
  if type(r.sandbox) == 'table' then
    local names = vim.tbl_keys(r.sandbox)
    table.sort(names)
    for _, n in ipairs(names) do
      local l = r.sandbox[n]
      if type(l) == 'table' then
        lines[#lines + 1] = '  ' .. layer_line(ts.field(n), l)
        if not l.ok and type(l.why) == 'string' then
          lines[#lines + 1] = '    ' .. ts.field(l.why)
        end
      end
    end
  end
  local ap = require('spd.approvals')
  lines[#lines + 1] = string.format(
    'approvals: %s, %d pending',
    ap.connected and 'following' or 'not following',
    ap.count()
  )
  return lines
end

--- :SpdStatus: spd's version, uptime, journal and sandbox layers.
function M.status(cb)
  M.ensure_watch()
  M.request('daemon.status', nil, function(err, r)
    if err then
      M.report('status', err)
    else
      M.last_status = r
      util.notify(table.concat(M.status_lines(r), '\n'))
    end
    if cb then
      cb(err, r)
    end
  end)
end

return M
