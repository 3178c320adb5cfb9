-- :SpdRun: a command in the sandbox of the current project, its output
-- streamed (run.output notifications) into a scratch buffer, escaped.
-- Each run has its own connection: <C-c> closes it and spd kills the run's
-- whole process group.

local client = require('spd.client')
local ts = require('spd.termsafe')
local util = require('spd.util')

local R = {}

local count = 0
R.runs = {} -- buffer -> run state

local function spd()
  return require('spd')
end

local function hl_stderr(b, first, last)
  for l = first, last - 1 do
    vim.api.nvim_buf_add_highlight(b, -1, 'ErrorMsg', l, 0, -1)
  end
end

-- Complete lines of one stream go to the buffer as they come; the partial
-- last line waits for its newline, or goes out when the other stream
-- writes or the run ends, so the two stay in order.
local function emit(st, stream, text)
  local other = stream == 'stdout' and 'stderr' or 'stdout'
  if st.partial[other] ~= '' then
    local n = vim.api.nvim_buf_line_count(st.buf)
    util.append(st.buf, { st.partial[other] })
    if other == 'stderr' then
      hl_stderr(st.buf, n, n + 1)
    end
    st.partial[other] = ''
  end
  local parts = vim.split(st.partial[stream] .. text, '\n', { plain = true })
  st.partial[stream] = table.remove(parts)
  if #parts > 0 then
    local n = vim.api.nvim_buf_line_count(st.buf)
    util.append(st.buf, parts)
    if stream == 'stderr' then
      hl_stderr(st.buf, n, n + #parts)
    end
  end
end

local function on_output(st, p)
  if st.done or type(p) ~= 'table' then
    return
  end
  local stream = p.stream == 'stderr' and 'stderr' or 'stdout'
  local bytes = nil
  if type(p.data) == 'string' then
    bytes = p.data
  elseif type(p.data_b64) == 'string' then
    bytes = util.base64_decode(p.data_b64)
  end
  if bytes then
    emit(st, stream, st.filters[stream]:write(bytes))
  end
end

local function finish(st, summary, level)
  if st.done then
    return
  end
  st.done = true
  for _, s in ipairs({ 'stdout', 'stderr' }) do
    local rest = st.partial[s] .. st.filters[s]:finish()
    st.partial[s] = ''
    if rest ~= '' then
      emit(st, s, rest .. '\n')
    end
  end
  util.append(st.buf, { '[' .. summary .. ']' })
  vim.b[st.buf].spd_run_status = summary
  if st.conn then
    st.conn:close()
  end
  if level and not util.visible(st.buf) then
    util.notify('run ' .. st.n .. ': ' .. summary, level)
  end
end

local function result_summary(r)
  if type(r) ~= 'table' then
    return 'done'
  end
  local s
  if r.cancelled == true then
    s = 'cancelled'
  elseif r.timed_out == true then
    s = 'timed out'
  elseif type(r.signal) == 'number' then
    s = 'killed by signal ' .. r.signal
  else
    s = 'exit ' .. tostring(r.exit_code)
  end
  if type(r.duration_ms) == 'number' then
    s = s .. string.format(' after %d ms', r.duration_ms)
  end
  if type(r.bytes_dropped) == 'table' then
    local d = (tonumber(r.bytes_dropped.stdout) or 0) + (tonumber(r.bytes_dropped.stderr) or 0)
    if d > 0 then
      s = s .. string.format(', %d bytes of output dropped', d)
    end
  end
  return s
end

local function on_result(st, err, r)
  if st.done then
    return
  end
  if err then
    finish(st, 'error: ' .. ts.field(client.errmsg(err)), vim.log.levels.ERROR)
    return
  end
  if type(r) == 'table' and type(r.warnings) == 'table' then
    local w = {}
    for _, x in ipairs(r.warnings) do
      w[#w + 1] = 'warning: ' .. ts.field(x)
    end
    util.append(st.buf, w)
  end
  finish(st, result_summary(r), vim.log.levels.INFO)
end

local function send(st, params)
  st.conn:request('cmd.run', params, function(err, r)
    if err and client.errcode(err) == 'NEEDS-APPROVAL' and not params.yes then
      -- The operator's own call: show exactly what a yes covers, ask.
      local d = type(err.data) == 'table' and err.data or {}
      local lines = {
        'spd asks: ' .. ts.field(d.reason or '?') .. '  (rule ' .. ts.field(d.rule or '?') .. ')',
      }
      for _, l in ipairs(require('spd.approvals').object_lines(d.object, '  ')) do
        lines[#lines + 1] = l
      end
      util.append(st.buf, lines)
      vim.ui.select({ 'Run it', 'Do not run it' }, { prompt = 'spd asks: run ' .. ts.argv(params.argv) .. '?' }, function(choice)
        if st.done then
          return
        end
        if choice ~= 'Run it' then
          finish(st, 'not run')
          return
        end
        params.wait = nil
        params.yes = true
        -- The yes is for what was shown: spd refuses it when a pinned
        -- file changed since.
        if type(d.pin) == 'string' then
          params.pin = d.pin
        end
        send(st, params)
      end)
      return
    end
    on_result(st, err, r)
  end)
end

--- Cancel the run shown in buffer b (the current one by default).
function R.cancel(b)
  local st = R.runs[b or vim.api.nvim_get_current_buf()]
  if not st or st.done then
    return
  end
  finish(st, 'cancelled')
end

--- Run argv (a list of strings) in the sandbox of the current project
--- (opts.workspace overrides) and show it in a new scratch buffer; returns
--- the buffer.
function R.run(argv, opts)
  opts = opts or {}
  spd().ensure_watch()
  count = count + 1
  local ws = opts.workspace or util.workspace()
  local b = util.scratch(string.format('spd://run/%d', count))
  local st = {
    n = count,
    buf = b,
    argv = argv,
    done = false,
    partial = { stdout = '', stderr = '' },
    filters = { stdout = ts.stream(), stderr = ts.stream() },
  }
  R.runs[b] = st
  vim.b[b].spd_run_status = 'running'
  util.set_lines(b, 0, -1, { '$ ' .. ts.argv(argv), '# in ' .. ts.field(ws) .. '   <C-c> cancels', '' })
  vim.keymap.set('n', '<C-c>', function()
    R.cancel(b)
  end, { buffer = b, silent = true, desc = 'cancel the run' })
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = b,
    callback = function()
      R.cancel(b)
      R.runs[b] = nil
    end,
  })
  util.show(b)
  local params = { argv = argv, workspace = ws, wait = false }
  local cwd = vim.fn.getcwd()
  if cwd == ws or cwd:sub(1, #ws + 1) == ws .. '/' then
    params.cwd = cwd
  end
  st.conn = client.connect(spd().conn_opts({
    on_notify = function(method, p)
      if method == 'run.output' then
        on_output(st, p)
      end
    end,
    on_close = function(err)
      on_result(st, err, nil)
    end,
  }))
  send(st, params)
  return b
end

--- :SpdRun {args}: split args as a shell would (no expansion) and run.
function R.command(args)
  local argv, why = util.shell_split(args)
  if not argv then
    util.notify('SpdRun: ' .. why, vim.log.levels.ERROR)
    return
  end
  if #argv == 0 then
    util.notify('usage: :SpdRun {command} [args...]', vim.log.levels.ERROR)
    return
  end
  return R.run(argv)
end

return R
