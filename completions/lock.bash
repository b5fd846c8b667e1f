# bash completion for lock(1)

_lock() {
    local value_flags=" n name monitor-retry timeout try conflict-exit-code lost-exit-code min-hold
        check check-interval check-failures metrics-file kill-after ready backend state-dir http-addr
        token token-file ca-file ca-path client-cert client-key tls-server-name datacenter
        endpoints session-ttl lock-delay session-checks value "
    local flags="-n -name -monitor-retry -timeout -try -shell -pass-stdin -child-exit-code
        -preserve-status -conflict-exit-code -lost-exit-code -min-hold -check -check-interval
        -check-failures -metrics-file -kill-after -ready -verbose -backend -state-dir -status -json -watch -version -h -help -http-addr
        -token -token-file -ca-file -ca-path -client-cert -client-key -tls-server-name
        -datacenter -stale -endpoints -session-ttl -lock-delay -session-checks -value"

    # bash splits "-flag=value" at "="; join the pieces again, remembering where each word began.
    local -a words=() starts=()
    local i w cword=0 join=0
    for ((i = 0; i < ${#COMP_WORDS[@]} && i <= COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if ((${#words[@]})) && [[ ${words[-1]} == -* ]] && { [[ $w == = ]] || ((join)); }; then
            words[-1]+=$w
            [[ $w == = ]] && join=1 || join=0
        else
            words+=("$w")
            starts+=("$i")
            join=0
        fi
        cword=$((${#words[@]} - 1))
    done
    local cur=${words[cword]}

    # Find the prefix: the first word that is not an option (or the word after "--").
    local prefix=-1 expect_value=0 name
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        if ((expect_value)); then
            expect_value=0
        elif [[ $w == -- ]]; then
            prefix=$((i + 1))
            break
        elif [[ $w == -?* ]]; then
            name=${w#-}
            name=${name#-}
            [[ $name != *=* && $value_flags == *" $name "* ]] && expect_value=1
        else
            prefix=$i
            break
        fi
    done

    if ((prefix >= 0 && cword > prefix)); then
        # The child: a command, then that command's own arguments.
        local child=$((prefix + 1))
        if [[ ${words[child]} == -- ]] && ((cword > child)); then
            child=$((child + 1))
        fi
        if declare -F _command_offset >/dev/null; then
            _command_offset "${starts[child]}"
        elif ((cword == child)); then
            mapfile -t COMPREPLY < <(compgen -c -- "$cur")
        else
            compopt -o default 2>/dev/null
            COMPREPLY=()
        fi
        return
    fi
    ((prefix >= 0)) && return  # the prefix itself: any name

    # An option's value, as "-flag=value" or as the word after "-flag".
    local flag value
    if [[ $cur == -?*=* ]]; then
        flag=${cur%%=*}
        value=${cur#*=}
    elif ((expect_value)); then
        flag=${words[cword - 1]}
        value=$cur
    fi
    if [[ -n $flag ]]; then
        # Where bash splits at "=", only the value is replaced; elsewhere the whole word is.
        local pre=
        [[ $cur == -?*=* && $COMP_WORDBREAKS != *=* ]] && pre=$flag=
        local opt=${flag#-}
        case ${opt#-} in
            timeout | try | min-hold | check-interval | kill-after | session-ttl | lock-delay)
                mapfile -t COMPREPLY < <(compgen -P "$pre" -W "1s 5s 30s 5m 1h" -- "$value") ;;
            backend)
                mapfile -t COMPREPLY < <(compgen -P "$pre" -W "local consul etcd zookeeper postgres" -- "$value") ;;
            ready)
                mapfile -t COMPREPLY < <(compgen -P "$pre" -W "hold wait" -- "$value") ;;
            state-dir | ca-path)
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -P "$pre" -d -- "$value") ;;
            token-file | ca-file | client-cert | client-key | metrics-file)
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -P "$pre" -f -- "$value") ;;
        esac
        return
    fi

    if [[ $cur == --* ]]; then
        mapfile -t COMPREPLY < <(compgen -P - -W "$flags" -- "${cur#-}")
    else
        mapfile -t COMPREPLY < <(compgen -W "$flags" -- "$cur")
    fi
}

complete -F _lock lock
