-- :SpdSessions: the sessions, each one's status, its diff in a diff
-- buffer, and ending it.

local ts = require('spd.termsafe')
local util = require('spd.util')

local S = {}

S.NAME = 'spd://sessions'

local line_ids = {}

local function spd()
  return require('spd')
end

local function str(v)
  return type(v) == 'string' and v or ''
end

--- One line of the list for a session record.
function S.line(s)
  return string.format(
    '%-16s  %-8s  %-8s  %4s cmds  %-20s  %s',
    ts.field(str(s.id)),
    ts.field(str(s.state)),
    ts.field(str(s.mode)),
    tostring(tonumber(s.commands) or 0),
    ts.field(str(s.feature)),
    ts.field(str(s.branch))
  )
end

function S.id_at_cursor()
  return line_ids[vim.api.nvim_win_get_cursor(0)[1]]
end

--- Reload the list into its buffer; cb(err, sessions) after.
function S.refresh(cb)
  spd().request('session.list', nil, function(err, res)
    local b = util.find(S.NAME)
    if err then
      spd().report('sessions', err)
    elseif b then
      local list = type(res) == 'table' and res.sessions or res
      local lines = {
        'spd sessions   <CR> status · D diff · E end · r refresh · q close',
        '',
      }
      line_ids = {}
      if type(list) ~= 'table' or #list == 0 then
        lines[#lines + 1] = 'no sessions'
      else
        for _, s in ipairs(list) do
          if type(s) == 'table' then
            lines[#lines + 1] = S.line(s)
            line_ids[#lines] = str(s.id)
          end
        end
      end
      util.set_lines(b, 0, -1, lines)
    end
    if cb then
      cb(err, res)
    end
  end)
end

local function kv_lines(t, indent, out)
  local keys = vim.tbl_keys(t)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(keys) do
    local v = t[k]
    if type(v) == "table" and not (vim.islist or vim.tbl_islist)(v) then
      out[#out + 1] = indent .. ts.field(tostring(k)) .. ':'
      kv_lines(v, indent .. '  ', out)
    elseif type(v) == 'table' then
      local ok, enc = pcall(vim.json.encode, v)
      out[#out + 1] = indent .. ts.field(tostring(k)) .. ': ' .. ts.field(ok and enc or '?')
    elseif v == vim.NIL then
      out[#out + 1] = indent .. ts.field(tostring(k)) .. ': -'
    else
      out[#out + 1] = indent .. ts.field(tostring(k)) .. ': ' .. ts.field(tostring(v))
    end
  end
  return out
end

--- The status of session id in a scratch buffer.
function S.status(id, cb)
  spd().request('session.status', { id = id }, function(err, res)
    if err then
      spd().report('session ' .. ts.field(id), err)
    elseif type(res) == 'table' then
      local b = util.scratch('spd://session/' .. id)
      util.set_lines(b, 0, -1, kv_lines(res, '', { 'session ' .. ts.field(id), '' }))
      util.show(b)
    end
    if cb then
      cb(err, res)
    end
  end)
end

--- The diff of session id in a buffer with filetype diff: the agent's
--- changes, escaped line by line.
function S.diff(id, cb)
  spd().request('session.diff', { id = id }, function(err, res)
    if err then
      spd().report('diff of ' .. ts.field(id), err)
    elseif type(res) == 'table' then
      local b = util.scratch('spd://session/' .. id .. '/diff', 'diff')
      local lines = { '# session ' .. ts.field(id) }
      if type(res.merge) == 'string' then
        lines[#lines + 1] = '# to merge: ' .. ts.field(res.merge)
      end
      if res.truncated == true then
        lines[#lines + 1] = '# the diff is truncated'
      end
      local d = ts.lines(str(res.diff))
      if #d > 0 and d[#d] == '' then
        table.remove(d)
      end
      if #d == 0 then
        lines[#lines + 1] = '# no changes'
      end
      vim.list_extend(lines, d)
      util.set_lines(b, 0, -1, lines)
      util.show(b)
    end
    if cb then
      cb(err, res)
    end
  end)
end

--- End session id after asking (force: without asking).
function S.end_session(id, force, cb)
  local function go()
    spd().request('session.end', { id = id }, function(err, res)
      if err then
        spd().report('end ' .. ts.field(id), err)
      else
        util.notify('session ' .. ts.field(id) .. ' ended')
      end
      if util.find(S.NAME) then
        S.refresh()
      end
      if cb then
        cb(err, res)
      end
    end)
  end
  if force then
    go()
    return
  end
  vim.ui.select({ 'End it', 'Keep it' }, { prompt = 'End session ' .. ts.field(id) .. '?' }, function(choice)
    if choice == 'End it' then
      go()
    end
  end)
end

--- :SpdSessions: open (or focus) the list.
function S.open()
  spd().ensure_watch()
  local b, new = util.scratch(S.NAME, 'spdsessions')
  if new then
    local o = { buffer = b, silent = true, nowait = true }
    local function on_line(f)
      return util.on_line(S.id_at_cursor, 'session', f)
    end
    vim.keymap.set('n', '<CR>', on_line(S.status), vim.tbl_extend('force', o, { desc = 'session status' }))
    vim.keymap.set('n', 'D', on_line(S.diff), vim.tbl_extend('force', o, { desc = 'session diff' }))
    vim.keymap.set('n', 'E', on_line(function(id)
      S.end_session(id)
    end), vim.tbl_extend('force', o, { desc = 'end the session' }))
    vim.keymap.set('n', 'r', function()
      S.refresh()
    end, vim.tbl_extend('force', o, { desc = 'refresh' }))
  end
  util.show(b)
  S.refresh()
end

return S
