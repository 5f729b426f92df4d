export {
  startAllInOne,
  loadAllInOneOptions,
  DEV_TOKEN_GRANT,
  type AllInOne,
  type AllInOneOptions,
} from './all-in-one';
