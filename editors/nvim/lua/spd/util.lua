-- Scratch buffers and messages shared by the plugin's views.

local M = {}

--- vim.notify with the plugin's prefix.  msg must already be escaped when
--- it holds anything an agent chose.
function M.notify(msg, level)
  vim.notify('spd: ' .. msg, level or vim.log.levels.INFO)
end

--- A list buffer's mapping: f(id) for the id of the line under the cursor
--- (id_at_cursor()), or a warning that the line holds no what.
function M.on_line(id_at_cursor, what, f)
  return function()
    local id = id_at_cursor()
    if id then
      f(id)
    else
      M.notify('no ' .. what .. ' on this line', vim.log.levels.WARN)
    end
  end
end

--- The buffer named name, or nil.
function M.find(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_name(b) == name then
      return b
    end
  end
  return nil
end

--- A scratch buffer named name (found again when it exists): not a file,
--- not modifiable but through M.set_lines, kept when hidden.  filetype
--- optional.  Returns the buffer and whether it was made now.
function M.scratch(name, filetype)
  local b = M.find(name)
  if b then
    return b, false
  end
  b = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(b, name)
  vim.api.nvim_buf_set_option(b, 'buftype', 'nofile')
  vim.api.nvim_buf_set_option(b, 'bufhidden', 'hide')
  vim.api.nvim_buf_set_option(b, 'swapfile', false)
  vim.api.nvim_buf_set_option(b, 'modifiable', false)
  if filetype then
    vim.api.nvim_buf_set_option(b, 'filetype', filetype)
  end
  vim.keymap.set('n', 'q', '<Cmd>close<CR>', { buffer = b, silent = true, desc = 'close' })
  return b, true
end

--- Replace lines [first, last) of a scratch buffer (0-based, last -1 for
--- the end).  Lines must not hold a newline: callers escape them first.
function M.set_lines(b, first, last, lines)
  if not vim.api.nvim_buf_is_valid(b) then
    return
  end
  vim.api.nvim_buf_set_option(b, 'modifiable', true)
  vim.api.nvim_buf_set_lines(b, first, last, false, lines)
  vim.api.nvim_buf_set_option(b, 'modifiable', false)
  vim.api.nvim_buf_set_option(b, 'modified', false)
end

--- Append lines at the end of a scratch buffer; a window on it whose
--- cursor was on the last line follows the new end.
function M.append(b, lines)
  if not vim.api.nvim_buf_is_valid(b) or #lines == 0 then
    return
  end
  local n = vim.api.nvim_buf_line_count(b)
  local follow = {}
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(w) == b and vim.api.nvim_win_get_cursor(w)[1] >= n then
      follow[#follow + 1] = w
    end
  end
  local only_empty = n == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ''
  M.set_lines(b, only_empty and 0 or n, only_empty and 1 or n, lines)
  local last = vim.api.nvim_buf_line_count(b)
  for _, w in ipairs(follow) do
    vim.api.nvim_win_set_cursor(w, { last, 0 })
  end
end

--- Whether a window shows buffer b.
function M.visible(b)
  return b ~= nil and vim.api.nvim_buf_is_valid(b) and vim.fn.bufwinid(b) ~= -1
end

--- Show b: focus a window that shows it, else open it in a split.
function M.show(b)
  local w = vim.fn.bufwinid(b)
  if w ~= -1 then
    vim.api.nvim_set_current_win(w)
    return
  end
  vim.cmd('split')
  vim.api.nvim_win_set_buf(0, b)
end

local B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
local b64val = {}
for i = 1, #B64 do
  b64val[B64:byte(i)] = i - 1
end

--- Decode standard base64 (run.output's data_b64); nil when malformed.
function M.base64_decode(s)
  s = s:gsub('%s', ''):gsub('=+$', '')
  local out, acc, nbits = {}, 0, 0
  for i = 1, #s do
    local v = b64val[s:byte(i)]
    if not v then
      return nil
    end
    acc = acc * 64 + v
    nbits = nbits + 6
    if nbits >= 8 then
      nbits = nbits - 8
      local byte = math.floor(acc / 2 ^ nbits)
      out[#out + 1] = string.char(byte)
      acc = acc - byte * 2 ^ nbits
    end
  end
  return table.concat(out)
end

--- The workspace of the current project, as spctl picks it: the nearest
--- directory from the current one up that holds .git, else the current
--- directory.
function M.workspace()
  local uv = vim.uv or vim.loop
  local cwd = vim.fn.getcwd()
  local dir = cwd
  while dir and dir ~= '' do
    if uv.fs_stat(dir .. '/.git') then
      return dir
    end
    local parent = dir:match('^(.*)/[^/]*$')
    if parent == nil or parent == dir then
      break
    end
    dir = parent
  end
  if uv.fs_stat('/.git') then
    return '/'
  end
  return cwd
end

--- Split a command line into words as a POSIX shell would (without
--- expansions): blanks separate, '...' is literal, "..." keeps all but
--- \" \\ \$ \`, a backslash quotes the next character.  Returns the list,
--- or nil and a message for an unterminated quote.
function M.shell_split(s)
  local words, cur, have = {}, {}, false
  local i, n = 1, #s
  while i <= n do
    local c = s:sub(i, i)
    if c == ' ' or c == '\t' then
      if have then
        words[#words + 1] = table.concat(cur)
        cur, have = {}, false
      end
    elseif c == "'" then
      local j = s:find("'", i + 1, true)
      if not j then
        return nil, 'unterminated single quote'
      end
      cur[#cur + 1] = s:sub(i + 1, j - 1)
      have = true
      i = j
    elseif c == '"' then
      i = i + 1
      while true do
        if i > n then
          return nil, 'unterminated double quote'
        end
        local d = s:sub(i, i)
        if d == '"' then
          break
        elseif d == '\\' and i < n and s:sub(i + 1, i + 1):find('["\\$`]') then
          cur[#cur + 1] = s:sub(i + 1, i + 1)
          i = i + 1
        else
          cur[#cur + 1] = d
        end
        i = i + 1
      end
      have = true
    elseif c == '\\' and i < n then
      cur[#cur + 1] = s:sub(i + 1, i + 1)
      have = true
      i = i + 1
    else
      cur[#cur + 1] = c
      have = true
    end
    i = i + 1
  end
  if have then
    words[#words + 1] = table.concat(cur)
  end
  return words
end

return M
