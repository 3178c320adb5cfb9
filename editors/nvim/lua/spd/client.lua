-- One connection to spd: NDJSON JSON-RPC 2.0 over its Unix socket,
-- authenticated once with the operator token (proto/PROTOCOL.md).
--
-- Notifications (run.output, approval.requested, journal.event) carry no
-- request id, so a stream that follows (a run, the approvals, the journal)
-- gets a connection of its own; closing that connection is also how a run
-- is cancelled: spd kills a run whose client went away.

local uv = vim.uv or vim.loop
local json = vim.json

local M = {}

-- The most a reply line may grow to before the connection is dropped: a
-- session's diff is the largest reply spd sends and is cut well below this;
-- anything longer is not spd speaking the protocol.
M.LINE_MAX = 16 * 1024 * 1024

-- ---- where spd lives (common/paths.c) ------------------------------------

local function abs_env(name)
  local v = vim.env[name]
  if v and v:sub(1, 1) == '/' then
    return v
  end
  return nil
end

local function home()
  local h = abs_env('HOME')
  if h then
    return h
  end
  return uv.os_homedir()
end

-- $over, else $xdg/spd, else $HOME/fallback/spd, as paths.c picks them.
local function pick(over, xdg, fallback)
  local v = abs_env(over)
  if v then
    return v
  end
  v = abs_env(xdg)
  if v then
    return v .. '/spd'
  end
  local h = home()
  if not h then
    return nil
  end
  return h .. '/' .. fallback .. '/spd'
end

--- spd's directories and files as spd itself resolves them: SPD_*_DIR,
--- else the XDG variables, else the defaults.  Returns a table with
--- config_dir, state_dir, runtime_dir, socket and token_file.
function M.paths()
  local p = {}
  p.config_dir = pick('SPD_CONFIG_DIR', 'XDG_CONFIG_HOME', '.config')
  p.state_dir = pick('SPD_STATE_DIR', 'XDG_STATE_HOME', '.local/state')
  p.runtime_dir = abs_env('SPD_RUNTIME_DIR')
  if not p.runtime_dir then
    local xdg = abs_env('XDG_RUNTIME_DIR')
    if xdg then
      p.runtime_dir = xdg .. '/spd'
    else
      p.runtime_dir = '/tmp/spd-' .. tostring(uv.getuid())
    end
  end
  p.socket = p.runtime_dir .. '/spd.sock'
  p.token_file = p.config_dir and (p.config_dir .. '/operator.token')
  return p
end

local function read_token(path)
  local f, err = io.open(path, 'r')
  if not f then
    return nil, err
  end
  local t = f:read('*l')
  f:close()
  if not t or t == '' then
    return nil, path .. ' is empty'
  end
  return (t:gsub('%s+$', ''))
end

-- ---- errors ----------------------------------------------------------------

--- A readable one-line message for a JSON-RPC error object or a local
--- failure {message, code}: "message (SYMBOL)".  The message is spd's, not
--- an agent's, yet may quote one: the caller escapes it before display.
function M.errmsg(err)
  if type(err) ~= 'table' then
    return tostring(err)
  end
  local code = type(err.data) == 'table' and err.data.code or err.code
  local msg = err.message
  if type(msg) ~= 'string' then
    msg = 'error'
  end
  if type(code) == 'string' then
    return msg .. ' (' .. code .. ')'
  end
  return msg
end

--- The stable symbol of an error (error.data.code), or nil.
function M.errcode(err)
  if type(err) ~= 'table' then
    return nil
  end
  if type(err.data) == 'table' and type(err.data.code) == 'string' then
    return err.data.code
  end
  if type(err.code) == 'string' then
    return err.code
  end
  return nil
end

-- ---- a connection ------------------------------------------------------

local Conn = {}
Conn.__index = Conn

--- Open a connection.  opts: socket, token_file (default: M.paths()),
--- on_ready(conn) once authenticated, on_notify(method, params) for each
--- notification, on_close(err) when the connection ends for any reason
--- but conn:close() (err a table {message, code}: "CONNECT", "UNAUTHORIZED",
--- "DISCONNECTED", …).  All callbacks run on the main loop, never in a
--- libuv callback.  Returns the connection at once; it connects in the
--- background.
function M.connect(opts)
  local p = M.paths()
  local self = setmetatable({
    socket = opts.socket or p.socket,
    token_file = opts.token_file or p.token_file,
    on_ready = opts.on_ready,
    on_notify = opts.on_notify,
    on_close = opts.on_close,
    next_id = 1,
    waiting = {},
    queue = {},
    rbuf = '',
    ready = false,
    closed = false,
  }, Conn)
  local token, terr = nil, nil
  if self.token_file then
    token, terr = read_token(self.token_file)
  end
  if not token then
    vim.schedule(function()
      self:_fail({
        code = 'UNAUTHORIZED',
        message = 'cannot read the operator token '
          .. tostring(self.token_file)
          .. ': '
          .. tostring(terr),
      })
    end)
    return self
  end
  self.pipe = uv.new_pipe(false)
  self.pipe:connect(
    self.socket,
    vim.schedule_wrap(function(err)
      if self.closed then
        return
      end
      if err then
        self:_fail({
          code = 'CONNECT',
          message = 'cannot connect to spd at ' .. self.socket .. ': ' .. err,
        })
        return
      end
      self:_start(token)
    end)
  )
  return self
end

function Conn:_start(token)
  self.pipe:read_start(function(err, chunk)
    vim.schedule(function()
      if self.closed then
        return
      end
      if err then
        self:_fail({ code = 'DISCONNECTED', message = 'lost spd: ' .. err })
      elseif chunk then
        self:_feed(chunk)
      else
        self:_fail({ code = 'DISCONNECTED', message = 'spd closed the connection' })
      end
    end)
  end)
  self:_send('auth', { token = token }, function(err, res)
    if err then
      local e = vim.deepcopy(err)
      if M.errcode(err) == 'UNAUTHORIZED' then
        e.message = 'spd refused the operator token in '
          .. self.token_file
          .. ' (is it the token of the spd at '
          .. self.socket
          .. '?): '
          .. tostring(err.message)
      end
      e.data = { code = M.errcode(err) or 'UNAUTHORIZED' }
      self:_fail(e)
      return
    end
    if type(res) ~= 'table' or res.principal ~= 'operator' then
      self:_fail({
        code = 'UNAUTHORIZED',
        message = 'the token in ' .. self.token_file .. ' is not the operator token',
      })
      return
    end
    self.ready = true
    local q = self.queue
    self.queue = {}
    for _, r in ipairs(q) do
      self:_send(r[1], r[2], r[3])
    end
    if self.on_ready then
      self.on_ready(self)
    end
  end)
end

function Conn:_send(method, params, cb)
  local id = self.next_id
  self.next_id = id + 1
  self.waiting[id] = cb or function() end
  local msg = { jsonrpc = '2.0', id = id, method = method }
  if params ~= nil then
    msg.params = params
  else
    msg.params = vim.empty_dict()
  end
  local ok, line = pcall(json.encode, msg)
  if not ok then
    self.waiting[id] = nil
    if cb then
      cb({ code = 'BAD-REQUEST', message = 'cannot encode the request: ' .. tostring(line) })
    end
    return
  end
  self.pipe:write(line .. '\n')
end

--- Send a request; cb(err, result) runs once with spd's answer, or with
--- an error {code="DISCONNECTED"} when the connection ends first.
--- Requests made before authentication completes wait for it.
function Conn:request(method, params, cb)
  if self.closed then
    if cb then
      cb({ code = 'DISCONNECTED', message = 'not connected to spd' })
    end
    return
  end
  if not self.ready then
    table.insert(self.queue, { method, params, cb })
    return
  end
  self:_send(method, params, cb)
end

function Conn:_feed(chunk)
  self.rbuf = self.rbuf .. chunk
  while not self.closed do
    local nl = self.rbuf:find('\n', 1, true)
    if not nl then
      break
    end
    local line = self.rbuf:sub(1, nl - 1)
    self.rbuf = self.rbuf:sub(nl + 1)
    if line ~= '' then
      self:_dispatch(line)
    end
  end
  if #self.rbuf > M.LINE_MAX and not self.closed then
    self:_fail({ code = 'DISCONNECTED', message = 'a reply from spd was too long' })
  end
end

function Conn:_dispatch(line)
  local ok, msg = pcall(json.decode, line)
  if not ok or type(msg) ~= 'table' then
    return
  end
  if msg.id == nil or msg.id == vim.NIL then
    if type(msg.method) == 'string' then
      if self.on_notify then
        self.on_notify(msg.method, msg.params)
      end
    elseif type(msg.error) == 'table' then
      -- An error for no request (LIMIT, FRAME-TOO-LARGE): spd closes the
      -- connection after it; say why.
      self:_fail(msg.error)
    end
    return
  end
  local cb = self.waiting[msg.id]
  self.waiting[msg.id] = nil
  if not cb then
    return
  end
  if msg.error ~= nil and msg.error ~= vim.NIL then
    cb(msg.error, nil)
  else
    cb(nil, msg.result)
  end
end

function Conn:_teardown()
  self.closed = true
  self.ready = false
  if self.pipe then
    if not self.pipe:is_closing() then
      self.pipe:close()
    end
    self.pipe = nil
  end
  local waiting = self.waiting
  self.waiting = {}
  local queue = self.queue
  self.queue = {}
  local gone = { code = 'DISCONNECTED', message = 'the connection to spd ended' }
  for _, cb in pairs(waiting) do
    cb(self.fail_err or gone, nil)
  end
  for _, r in ipairs(queue) do
    if r[3] then
      r[3](self.fail_err or gone, nil)
    end
  end
end

function Conn:_fail(err)
  if self.closed then
    return
  end
  if type(err) == 'table' and type(err.code) == 'string' and err.data == nil then
    err.data = { code = err.code }
  end
  self.fail_err = err
  self:_teardown()
  if self.on_close then
    self.on_close(err)
  end
end

--- Close the connection (spd ends whatever it ran for it: a run is
--- killed).  on_close is not called; waiting requests get DISCONNECTED.
function Conn:close()
  if self.closed then
    return
  end
  self:_teardown()
end

function Conn:is_open()
  return not self.closed
end

return M
